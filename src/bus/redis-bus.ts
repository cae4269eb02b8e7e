import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { rowChanged, type Change, type RowChanged } from '../domain.js'
import type { BusHealth, InvalidationBus } from './bus.js'
import { Trust, writerWaitMs, youthMs } from './lease.js'
import { createMessageCodec } from './messages.js'
import { createInbox } from './inbox.js'
import { createBusMetrics, throttledLog } from './bus-metrics.js'
import { createPublisher, withTimeout } from './publisher.js'
import { createRegistry } from './registry.js'
import { createSubscriber } from './subscriber.js'
import type { RedisConnection } from '../config.js'
import type { RedisBusOptions } from './redis-bus-options.js'
import { createPrimaryVouching } from './primary-vouching.js'
import { createCatchUp } from './catch-up.js'
import { createHeartbeat } from './heartbeat.js'

/**
 * The invalidation bus over Redis pub/sub, made strict: the subscriber (subscriber.ts), the
 * lease (lease.ts) and its tick (heartbeat.ts), the node registry (registry.ts), publish with
 * acknowledgements (publisher.ts), the authenticated messages (messages.ts, inbox.ts), the
 * catch-up after a new subscription (catch-up.ts) and, with Sentinel, the primary's vouching
 * (primary-vouching.ts). This file wires them, and keeps the epochs.
 * See "Many nodes over Redis" in the README for the guarantee and what it rests on.
 */
export type { RedisBusOptions }

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
  const connectTimeoutMs = Math.max(1000, leaseMs * 2)

  const connection: RedisConnection = options.connection ?? { kind: 'url', url: options.url ?? '' }
  const codec = createMessageCodec(prefix, options.keys)
  const trust = new Trust(leaseMs, leaseMs * 3)
  const changeHandlers: Array<(change: Change | RowChanged) => void> = []
  const epochHandlers: Array<() => void> = []
  let closed = false
  let started = false
  let epoch = 0

  const warnThrottled = throttledLog(log, now)

  const count = createBusMetrics(
    options.metrics,
    { subscribed: () => trust.isSubscribed(), registered: () => trust.registeredAt(now()), trusted: () => trusted(), epoch: () => epoch },
    options.unsafeNoEpochFlush === true || options.unsafeCatchUpSkipsWindow === true || options.unsafeHorizonIgnoresOutbox === true,
    options.unsafeNoPrimaryCheck === true,
  )
  if (options.unsafeNoEpochFlush) log.warn('UNSAFE: caches are not flushed on a new epoch (chaos-test entry point)')
  const catchUp = createCatchUp({ ...options, log, warn: warnThrottled, isClosed: () => closed, deliver, newEpoch, roundTrip: () => subscriber.roundTrip() })
  const connections = () => ({ subscriber, registry })
  const primary = createPrimaryVouching({ ...options, connection, now, log, warn: warnThrottled, newEpoch, connections, countError: () => count.error('sentinel') })

  const trusted = (): boolean => {
    if (closed || !catchUp.caughtUp()) return false
    const at = now()
    return trust.trustedAt(at) && primary.vouched(at)
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
    ...(primary.confirm ? { confirmPrimary: primary.confirm } : {}),
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
        primary.subscribedTo(address)
        catchUp.subscribed()
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
        primary.subscribedTo(undefined)
        count.reconnect(reason)
        if (wasSubscribed) log.warn({ reason, err: error?.message }, 'invalidation channel lost')
        else warnThrottled('invalidation channel unavailable', { reason, err: error?.message })
        catchUp.lost(reason)
      },
      error(error) {
        count.error('connection')
        warnThrottled('redis subscriber connection error', { err: error.message })
      },
    },
    now,
  )

  const heartbeat = createHeartbeat({
    leaseMs,
    connectTimeoutMs,
    now,
    trust,
    subscriber,
    always: () => (registry.renew(), primary.poll()),
    timely: () => primary.leaveFormerPrimary(),
  })
  const ping = heartbeat.ping

  return {
    nodeId,
    async start() {
      if (started) return
      started = true
      registry.connect()
      subscriber.start()
      primary.poll()
      heartbeat.start()
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
      heartbeat.stop()
      catchUp.close()
      await publisher.drain()
      publisher.close()
      await withTimeout(registry.deregister(), 500).catch((error: Error) => log.warn({ err: error.message }, 'could not leave the registry; the entry expires'))
      await subscriber.close()
      trust.lost()
      newEpoch('closed')
      registry.close()
      primary.close()
    },
  }
}
