import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import type { Metrics } from '../metrics.js'
import { rowChanged, type BusHealth, type Change, type ChangeLog, type InvalidationBus, type RowChanged } from './bus.js'
import { Trust, writerWaitMs, youthMs } from './lease.js'
import { createMessageCodec, type BusKey } from './messages.js'
import { createInbox } from './inbox.js'
import { createBusMetrics, throttledLog } from './bus-metrics.js'
import { createPublisher, sleep, withTimeout } from './publisher.js'
import { createRegistry } from './registry.js'
import { createSubscriber } from './subscriber.js'
import type { RedisConnection } from '../config.js'
import { createSentinelWatch, type SentinelWatch } from './sentinel-watch.js'

/**
 * The invalidation bus over Redis pub/sub, made strict, from five parts: the subscriber
 * connection (subscriber.ts), the lease and trust arithmetic (lease.ts), the node registry
 * (registry.ts), publish with acknowledgements (publisher.ts) and the authenticated
 * messages (messages.ts, received by inbox.ts). This file wires them: epochs, the tick.
 * See "Many nodes over Redis" in the README for the guarantee and what it rests on.
 */
export interface RedisBusOptions {
  /** how to reach Redis: one server by URL, or the primary Sentinel names (`url` is short for `{ kind: 'url', url }`) */
  connection?: RedisConnection
  url?: string
  leaseMs: number
  logger: Logger
  metrics: Metrics
  /** from the JWT key material (messages.ts deriveBusKeys): every node has it, Redis does not */
  keys: BusKey[]
  /** channel and key prefix; all nodes of one deployment share it (default `chat-auth`) */
  prefix?: string
  /** this node's id on the bus (default: random) */
  nodeId?: string
  /**
   * The store's record of committed changes: with it, a new subscription catches up on what
   * it may have missed instead of flushing the caches (see `catchUp` below). Without it,
   * every new subscription flushes.
   */
  changeLog?: ChangeLog
  /**
   * UNSAFE — only for the chaos test that proves its checker bites (through its own entry
   * point, never the configuration): do not flush the caches on a new epoch, and trust a
   * new subscription without catching up.
   */
  unsafeNoEpochFlush?: boolean
  /**
   * UNSAFE — only for the chaos test's Sentinel mutant (same entry point): trust the
   * subscribed server without asking the sentinels, and answer writes without confirming
   * the primary.
   */
  unsafeNoPrimaryCheck?: boolean
  /**
   * UNSAFE — the chaos test's second mutant: a catch-up that reads from where the new
   * subscription starts instead of from the previous horizon, so it skips every change
   * committed while the channel was lost.
   */
  unsafeCatchUpSkipsWindow?: boolean
}

const CATCH_UP_RETRY_MS = 250

export interface RedisBus extends InvalidationBus {
  readonly nodeId: string
}

export function createRedisBus(options: RedisBusOptions): RedisBus {
  const { leaseMs } = options
  const prefix = options.prefix ?? 'chat-auth'
  const nodeId = options.nodeId ?? randomBytes(8).toString('hex')
  const log = options.logger.child({ component: 'redis-bus', nodeId })
  const now = () => performance.now()
  const changesChannel = `${prefix}:changes`
  const ackChannelOf = (node: string) => `${prefix}:ack:${node}`
  const ackChannel = ackChannelOf(nodeId)
  const tickMs = Math.max(10, Math.floor(leaseMs / 4))
  const deadAfterMs = leaseMs * 2
  const connectTimeoutMs = Math.max(1000, leaseMs * 2)

  const connection: RedisConnection = options.connection ?? { kind: 'url', url: options.url ?? '' }
  const codec = createMessageCodec(prefix, options.keys)
  const trust = new Trust(leaseMs, leaseMs * 3)
  const changeHandlers: Array<(change: Change | RowChanged) => void> = []
  const epochHandlers: Array<() => void> = []
  let closed = false
  let started = false
  let epoch = 0
  let lastTick = now()
  let tickTimer: NodeJS.Timeout | undefined
  // Catch-up state. `horizon`: every change committed after the last completed catch-up (or
  // flush) read the log has a transaction id at or above it. `subscription` counts confirmed
  // subscriptions; `caughtUp` says the current one has caught up (trust needs it).
  let horizon: string | undefined
  let subscription = 0
  let caughtUp = false

  const warnThrottled = throttledLog(log, now)

  const count = createBusMetrics(
    options.metrics,
    { subscribed: () => trust.isSubscribed(), registered: () => trust.registeredAt(now()), trusted: () => trusted(), epoch: () => epoch },
    options.unsafeNoEpochFlush === true || options.unsafeCatchUpSkipsWindow === true,
    options.unsafeNoPrimaryCheck === true,
  )
  if (options.unsafeNoEpochFlush) log.warn('UNSAFE: caches are not flushed on a new epoch (chaos-test entry point)')
  if (options.unsafeCatchUpSkipsWindow) log.warn('UNSAFE: the catch-up skips what was committed while the channel was lost (chaos-test entry point)')
  const catchUps = options.metrics.counter('chat_auth_bus_catch_ups_total', 'Catch-ups from the change log after a new subscription, by outcome', ['outcome'])
  const caughtUpChanges = options.metrics.counter('chat_auth_bus_catch_up_changes_total', 'Changes applied by catch-ups from the change log')

  // ── Redis Sentinel: which server is the primary (sentinel-watch.ts) ──────
  let subscribedAddress: string | undefined
  const watch: SentinelWatch | undefined =
    connection.kind === 'sentinel' && !options.unsafeNoPrimaryCheck
      ? createSentinelWatch({
          connection,
          leaseMs,
          queryTimeoutMs: leaseMs,
          now,
          onPrimaryChanged(address) {
            // What the caches hold may predate changes published on the new primary.
            newEpoch('primary_changed')
            log.warn({ primary: address }, address === undefined ? 'no majority of sentinels names a primary' : 'the sentinels name a new primary')
            leaveFormerPrimary()
          },
          onError(error) {
            count.error('sentinel')
            warnThrottled('redis sentinel connection error', { err: error.message })
          },
        })
      : undefined
  if (options.unsafeNoPrimaryCheck) log.warn('UNSAFE: the primary is not checked with the sentinels (chaos-test entry point)')

  /** With Sentinel: only while a majority of sentinels, asked within a lease, name the server we are subscribed to. */
  const primaryVouched = (at: number): boolean => watch === undefined || (subscribedAddress !== undefined && subscribedAddress === watch.primaryAddress() && at < watch.vouchedUntil())

  const trusted = (): boolean => {
    if (closed || !caughtUp) return false
    const at = now()
    return trust.trustedAt(at) && primaryVouched(at)
  }

  /** Connections on a server the sentinels no longer name are dropped; ioredis asks them again. */
  function leaveFormerPrimary(): void {
    const primary = watch?.primaryAddress()
    if (primary === undefined) return
    if (subscriber.isSubscribed() && subscribedAddress !== primary) subscriber.drop('primary_changed')
    const commandAddress = registry.address()
    if (commandAddress !== undefined && commandAddress !== primary) registry.reconnect()
  }

  /**
   * After a new subscription is confirmed, learn from the store every change that may have
   * been missed while there was none, then trust the caches again, keeping every entry that
   * did not change. Correct because the read starts after the subscription was confirmed:
   * a change committed after the read is published after it, so it reaches us on this
   * subscription (or the next catch-up has it: its xid is at or above the new horizon);
   * one committed before it is in the read (if its xid is at or above the previous horizon)
   * or was in an earlier read or flush. Fills in flight are settled by their tickets: each
   * change applied here counts as a change of its key. When the read cannot prove it is
   * complete (first subscription, rows pruned, too many), flush: the horizon is taken before
   * the flush, so every fill after it read a store at least as new.
   */
  async function catchUp(changeLog: ChangeLog, current: number): Promise<void> {
    while (!closed && current === subscription) {
      try {
        const read = await changeLog.since(options.unsafeCatchUpSkipsWindow && horizon !== undefined ? undefined : horizon)
        if (closed || current !== subscription) return // lost meanwhile: the next subscription reads from the same horizon
        if (options.unsafeCatchUpSkipsWindow && horizon !== undefined) {
          horizon = read.horizon
        } else if (read.complete) {
          for (const change of read.changes) deliver(change)
          caughtUpChanges(undefined, read.changes.length)
          catchUps({ outcome: 'complete' })
          log.info({ changes: read.changes.length }, 'caught up from the change log')
          horizon = read.horizon
        } else {
          const first = horizon === undefined
          horizon = read.horizon
          catchUps({ outcome: first ? 'first' : 'incomplete' })
          if (!first) log.warn('change log cannot prove the catch-up complete: flushing caches')
          newEpoch(first ? 'subscribed' : 'catch_up_incomplete')
        }
        caughtUp = true
        return
      } catch (error) {
        catchUps({ outcome: 'failed' })
        warnThrottled('catch-up from the change log failed; retrying (the caches stay untrusted)', { err: (error as Error).message })
        await sleep(CATCH_UP_RETRY_MS)
      }
    }
  }

  function newEpoch(reason: string): void {
    epoch++
    count.epoch(reason)
    if (!options.unsafeNoEpochFlush) runAll(epochHandlers, undefined, () => log.error('epoch handler failed'))
  }

  function deliver(change: Change | RowChanged): void {
    // A change we could not apply may leave a stale entry: start afresh.
    runAll(changeHandlers, change, () => (log.error({ kind: change.kind }, 'change handler failed; flushing caches'), newEpoch('handler_error')))
  }

  function runAll<T>(handlers: Array<(value: T) => void>, value: T, failed: () => void): void {
    for (const handler of handlers) {
      try {
        handler(value)
      } catch (error) {
        count.error('handler')
        log.error({ err: error }, 'bus handler threw')
        failed()
      }
    }
  }

  // ── command connection: registry, publish, acks ─────────────────────────
  const registry = createRegistry({
    connection,
    prefix,
    nodeId,
    ttlMs: trust.registrationTtlMs,
    connectTimeoutMs,
    now,
    onRegistered({ runId, wasPresent }, sentAt) {
      if (trust.registeredAt(sentAt) && !wasPresent) {
        count.error('registration_lost')
        warnThrottled('our registry entry had gone before it expired (removed on Redis?)', { runId })
      }
      trust.registered(runId, sentAt)
    },
    onError(operation, error) {
      count.error(operation)
      warnThrottled(operation === 'register' ? 'registration failed' : 'redis command connection error', { err: error.message })
    },
  })

  // ── publish ──────────────────────────────────────────────────────────────
  const publisher = createPublisher({
    registry,
    codec,
    nodeId,
    writerWaitMs: writerWaitMs(leaseMs),
    youthMs: youthMs(leaseMs),
    publishTimeoutMs: Math.max(1000, leaseMs * 2),
    ...(watch ? { confirmPrimary: watch.confirm } : {}),
    now,
    onRetry: (error) => {
      count.error('publish_retry')
      log.warn({ err: error.message }, 'publish failed; retrying')
    },
    onOutcome: (outcome, latencyMs, missing) => {
      count.published(outcome, latencyMs)
      if (outcome === 'failed') log.error('change committed but not published: the write fails')
      else if (missing.length) log.debug({ missing }, 'waited out the lease of nodes that did not acknowledge')
    },
  })

  // ── subscriber connection ────────────────────────────────────────────────
  const inbox = createInbox({
    codec,
    nodeId,
    count,
    warn: warnThrottled,
    apply: deliver,
    flush: newEpoch,
    sendAck: (writer, payload) => registry.publishAck(ackChannelOf(writer), payload),
    acked: (ack) => publisher.acked(ack),
  })

  const subscriber = createSubscriber(
    { connection, name: `${prefix}:sub:${nodeId}`, channels: [changesChannel, ackChannel], connectTimeoutMs },
    {
      subscribed(runId, address) {
        // From here on every change reaches us; what the caches hold from before may not
        // have been followed, and fills in flight may have read before a change we missed.
        trust.subscribed(runId)
        subscribedAddress = address
        const current = ++subscription
        caughtUp = false
        if (options.changeLog && !options.unsafeNoEpochFlush) void catchUp(options.changeLog, current)
        else {
          newEpoch('subscribed')
          caughtUp = true
        }
        log.info({ runId }, 'invalidation channel subscribed')
        ping()
        if (!trust.registeredAt(now()) || trust.until() === 0) registry.renew()
      },
      message(channel, payload) {
        if (channel === changesChannel) inbox.change(payload)
        else if (channel === ackChannel) inbox.ack(payload)
      },
      pong: () => trust.pongReceived(),
      lost(reason, error) {
        const wasSubscribed = trust.isSubscribed()
        trust.lost()
        subscribedAddress = undefined
        count.reconnect(reason)
        if (wasSubscribed) log.warn({ reason, err: error?.message }, 'invalidation channel lost')
        else warnThrottled('invalidation channel unavailable', { reason, err: error?.message })
        caughtUp = false
        // With a change log the caches are kept, untrusted, until the next subscription catches up.
        if (!options.changeLog) newEpoch(reason)
      },
      error(error) {
        count.error('connection')
        warnThrottled('redis subscriber connection error', { err: error.message })
      },
    },
    now,
  )

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
    watch?.poll()
    if (stalled) return
    leaveFormerPrimary()
    if (!subscriber.isSubscribed()) {
      if (at - subscriber.openedAt() > connectTimeoutMs) subscriber.drop('subscribe_timeout')
      return
    }
    const oldest = trust.oldestPing()
    if (oldest !== undefined && at - oldest > deadAfterMs) return subscriber.drop('pongs_missed')
    ping()
  }

  return {
    nodeId,
    async start() {
      if (started) return
      started = true
      registry.connect()
      subscriber.start()
      watch?.poll()
      tickTimer = setInterval(tick, tickMs)
      // A node may serve (from the store) before the channel vouches for its cache; give it
      // a moment to do so, but never refuse to start because Redis is away.
      const until = now() + Math.max(2000, leaseMs * 4)
      while (!closed && !trusted() && now() < until) await sleep(10)
      if (!trusted()) log.warn('invalidation channel not trusted yet; serving from the store until it is')
    },
    publish(change) {
      // The change is committed: our own caches may have it at once.
      deliver(change)
      return publisher.publish(rowChanged(change))
    },
    onChange(handler) {
      changeHandlers.push(handler)
    },
    onEpochChange(handler) {
      epochHandlers.push(handler)
    },
    trusted,
    health: (): BusHealth => ({ ready: trusted(), trusted: trusted(), epoch }),
    async close() {
      if (closed) return
      // Stop trusting before leaving the registry: writers stop waiting for us from then on.
      closed = true
      if (tickTimer) clearInterval(tickTimer)
      await publisher.drain()
      publisher.close()
      await withTimeout(registry.deregister(), 500).catch((error: Error) => log.warn({ err: error.message }, 'could not leave the registry; the entry expires'))
      await subscriber.close()
      trust.lost()
      newEpoch('closed')
      registry.close()
      watch?.close()
    },
  }
}
