import type { Trust } from './lease.js'

export interface HeartbeatOptions {
  leaseMs: number
  /** how long a subscription may take before the connection is given up */
  connectTimeoutMs: number
  now: () => number
  trust: Trust
  subscriber: { ping(): boolean; drop(reason: string): void; isSubscribed(): boolean; openedAt(): number }
  /** our entry in the node registry, renewed every tick */
  registry: { renew(): void }
  /** with Sentinel, the primary's view: asked every tick, and left when the sentinels name another */
  primary: { poll(): void; leaveFormerPrimary(): void }
}

export interface Heartbeat {
  /** one PING on the subscriber, counted by the lease */
  ping(): void
  start(): void
  stop(): void
}

/**
 * The bus's tick (a quarter lease): renews the registration, asks the sentinels, pings the
 * subscriber (the lease rests on the pongs) and drops a connection whose pongs or
 * subscription are overdue.
 */
export function createHeartbeat(options: HeartbeatOptions): Heartbeat {
  const { now, trust, subscriber, registry, primary, connectTimeoutMs } = options
  const tickMs = Math.max(10, Math.floor(options.leaseMs / 4))
  const deadAfterMs = options.leaseMs * 2
  let lastTick = now()
  let timer: NodeJS.Timeout | undefined

  function ping(): void {
    const at = now()
    if (subscriber.ping()) trust.pingSent(at)
  }

  function tick(): void {
    const at = now()
    // After a stall (SIGSTOP, a long GC) the socket may hold pongs not yet read: look again next tick.
    const stalled = at - lastTick > tickMs * 3 + 50
    lastTick = at
    registry.renew()
    primary.poll()
    if (stalled) return
    primary.leaveFormerPrimary()
    if (!subscriber.isSubscribed()) {
      if (at - subscriber.openedAt() > connectTimeoutMs) subscriber.drop('subscribe_timeout')
      return
    }
    const oldest = trust.oldestPing()
    if (oldest !== undefined && at - oldest > deadAfterMs) return subscriber.drop('pongs_missed')
    ping()
  }

  return {
    ping,
    start() {
      timer = setInterval(tick, tickMs)
    },
    stop() {
      if (timer) clearInterval(timer)
    },
  }
}
