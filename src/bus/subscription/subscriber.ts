import type { Redis } from 'ioredis'
import type { RedisConnection } from '../../config.js'
import { connectedAddress, createRedisClient } from '../connection/redis-connection.js'

/**
 * The node's subscriber connection: one ioredis instance per TCP connection, never
 * reconnected, resubscribed or replayed by the library — when a connection ends, what it
 * did not deliver is lost, and the next one is a new instance that starts a new epoch.
 *
 * What the lease relies on, checked in ioredis 5's source (and in test/system/redis/redis-bus.test.ts):
 * PING is allowed in subscriber mode (Command.FLAGS.VALID_IN_SUBSCRIBER_MODE);
 * `subscribe()` resolves once every channel is confirmed (DataHandler fillSubCommand);
 * `message` events are emitted synchronously as replies are parsed, in order, while a
 * command's promise settles later, so when a PING's promise settles every message that
 * came before its reply has been handled; with `retryStrategy: () => null` a closed
 * connection ends (status `end`) and its queued commands are rejected.
 */
export interface SubscriberEvents {
  /** Every channel is confirmed on the Redis instance `runId` (its address: `address()`). */
  subscribed(runId: string): void
  message(channel: string, payload: string): void
  pong(): void
  /** The connection is gone (or given up on); `subscribed` may come again on a new one. */
  lost(reason: string, error?: Error): void
  /** A failure worth logging that does not lose the connection. */
  error(error: Error): void
}

export interface SubscriberOptions {
  connection: RedisConnection
  /** Redis Cluster: the master of the bus's slot, where each connection goes (connection/watch.ts) */
  owner?: () => string | undefined
  /** CLIENT SETNAME of every connection */
  name: string
  channels: string[]
  connectTimeoutMs: number
  /**
   * Redis Cluster: what happens when the server drops our subscription itself because the
   * slot left it (an unrequested SUNSUBSCRIBE, a MOVED, a PING answered as if unsubscribed).
   * By default the connection is given up (`giveUp`) and the next one goes to the slot's
   * master; only a test's mutant replaces it (src/assembly/bus.ts NodeParts).
   */
  onSlotLeft?: (reason: string, giveUp: () => void) => void
}

export interface Subscriber {
  /** Connects, and keeps a subscription (a new connection after each loss), telling `events` what happens. */
  start(events: SubscriberEvents): void
  /** Sends a PING on the subscribed connection; false when there is none to send it on. */
  ping(): boolean
  /** Gives up on the current connection (pongs missed, subscribe too slow). */
  drop(reason: string): void
  /** monotonic time the current connection was opened at */
  openedAt(): number
  isSubscribed(): boolean
  /** host:port of the server the current subscription is confirmed on (undefined: none) */
  address(): string | undefined
  /** Leaves the channels (so Redis no longer counts us as a receiver), then the connection. */
  close(): Promise<void>
}

const RECONNECT_MAX_MS = 500
const CLOSE_WAIT_MS = 500

interface Connection {
  redis: Redis
  events: SubscriberEvents
  openedAt: number
  subscribed: boolean
  dead: boolean
  address: string | undefined
}

export function createSubscriber(options: SubscriberOptions, now: () => number): Subscriber {
  // On a Cluster the channels are sharded (SPEC §11): SSUBSCRIBE, `smessage`.
  const sharded = options.connection.kind === 'cluster'
  let current: Connection | undefined
  let attempt = 0
  let reconnectTimer: NodeJS.Timeout | undefined
  let closed = false
  const onSlotLeft = options.onSlotLeft ?? ((_reason: string, giveUp: () => void) => giveUp())
  const slotLeft = (conn: Connection, reason: string, error?: Error) => onSlotLeft(reason, () => lose(conn, reason, error))

  function connect(events: SubscriberEvents): void {
    reconnectTimer = undefined
    if (closed) return
    const redis = createRedisClient(
      options.connection,
      {
      lazyConnect: true,
      connectionName: options.name,
      connectTimeout: options.connectTimeoutMs,
      keepAlive: 1000,
      noDelay: true,
      // Nothing crosses from one connection to the next: see the comment above.
      retryStrategy: () => null,
      autoResubscribe: false,
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // Sentinel mode: when no sentinel answers, this connection attempt fails (the next is a new instance).
      sentinelRetryStrategy: () => null,
      },
      options.owner,
    )
    const conn: Connection = { redis, events, openedAt: now(), subscribed: false, dead: false, address: undefined }
    current = conn
    redis.on(sharded ? 'smessage' : 'message', (channel: string, payload: string) => {
      if (!conn.dead) events.message(channel, payload)
    })
    // 'error' precedes 'close'/'end'; the loss itself is reported once, on 'end'.
    redis.on('error', (error: Error) => {
      if (conn.dead) return
      // A Cluster server unsubscribes us itself when the slot leaves it (a failover, a
      // migration): ioredis, which did not ask, reports the replies it cannot place as
      // errors, and the connection, no longer subscribed, would hear nothing. It is lost.
      if (sharded && /Command queue state error/.test(error.message)) return slotLeft(conn, 'unsubscribed_by_server', error)
      events.error(error)
    })
    // An SSUBSCRIBE sent to a server that no longer holds the slot is redirected, and never answered.
    if (sharded) redis.on('moved', () => slotLeft(conn, 'slot_moved'))
    redis.on('end', () => lose(conn, 'closed'))
    void (async () => {
      await redis.connect()
      const info = await redis.info('server')
      const runId = /run_id:([0-9a-f]+)/.exec(info)?.[1]
      if (runId === undefined) throw new Error('INFO server gave no run_id')
      const address = connectedAddress(redis)
      if (address === undefined) throw new Error('connection closed before it subscribed')
      await (sharded ? redis.ssubscribe(...options.channels) : redis.subscribe(...options.channels))
      if (conn.dead) return
      conn.subscribed = true
      conn.address = address
      attempt = 0
      events.subscribed(runId)
    })().catch((error: Error) => lose(conn, 'subscribe_failed', error))
  }

  function lose(conn: Connection, reason: string, error?: Error): void {
    if (conn.dead) return
    conn.dead = true
    conn.redis.disconnect()
    if (closed) return
    conn.events.lost(reason, error)
    if (!reconnectTimer) {
      const delay = Math.min(RECONNECT_MAX_MS, 20 * 2 ** Math.min(attempt++, 5)) * (0.5 + Math.random() / 2)
      reconnectTimer = setTimeout(connect, delay, conn.events)
    }
  }

  return {
    start(events) {
      if (current === undefined) connect(events)
    },
    ping() {
      const conn = current
      if (!conn || conn.dead || !conn.subscribed) return false
      conn.redis.ping().then(
        (reply) => {
          if (conn.dead) return
          // Subscribed, Redis answers a PING with ["pong", ""]; a plain "PONG" (or anything else)
          // means the server dropped our subscription behind ioredis's back (a Cluster moving the slot).
          if (sharded && !Array.isArray(reply)) slotLeft(conn, 'unsubscribed_by_server')
          if (!conn.dead) conn.events.pong()
        },
        (error: Error) => lose(conn, 'ping_failed', error),
      )
      return true
    },
    drop(reason) {
      if (current) lose(current, reason)
    },
    openedAt: () => current?.openedAt ?? 0,
    isSubscribed: () => current !== undefined && !current.dead && current.subscribed,
    address: () => (current !== undefined && !current.dead && current.subscribed ? current.address : undefined),
    async close() {
      closed = true
      if (reconnectTimer) clearTimeout(reconnectTimer)
      const conn = current
      if (!conn || conn.dead) return
      conn.dead = true
      if (conn.subscribed) {
        const left = (sharded ? conn.redis.sunsubscribe() : conn.redis.unsubscribe()).catch(() => {})
        await Promise.race([left, new Promise((resolve) => setTimeout(resolve, CLOSE_WAIT_MS).unref())])
      }
      conn.redis.disconnect()
    },
  }
}
