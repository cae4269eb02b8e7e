import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { RedisConnection } from '../config.js'
import type { Metrics } from '../metrics.js'
import { rowChanged } from '../domain.js'
import type { BusHealth, ChangeLog, InvalidationBus } from './bus.js'
import { createBusMetrics } from './bus-metrics.js'
import { throttledLog } from '../throttled-log.js'
import { createCatchUp } from './catch-up.js'
import { createListeners } from './listeners.js'
import { createPrimaryVouching } from './connection/primary-vouching.js'
import { createWatch, type PrimaryWatch } from './connection/watch.js'
import { createInbox } from './messages/inbox.js'
import { createMessageCodec, type BusKey } from './messages/messages.js'
import { createPublisher, withTimeout } from './publishing/publisher.js'
import { receiptOf } from './publishing/receipt.js'
import { createBoard, isAnswer } from './publishing/board.js'
import { createRegistry } from './publishing/registry.js'
import { createHeartbeat } from './subscription/heartbeat.js'
import { Trust, writerWaitMs, youthMs } from './subscription/lease.js'
import { createSubscriber, type SubscriberOptions } from './subscription/subscriber.js'

/** How to make the Redis invalidation bus. */
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
   * The store's record of committed changes: read after each new subscription instead of
   * flushing the caches, and periodically while subscribed (catch-up.ts). Without it,
   * every new subscription flushes.
   */
  changeLog?: ChangeLog
  /** how often a caught-up subscription reads the change log again (default catch-up.ts CATCH_UP_EVERY_MS) */
  catchUpEveryMs?: number
  /** with Sentinel or a Cluster, wraps what tells which server the bus must be on (connection/watch.ts; undefined: no watch) */
  primaryWatch?: (watch: PrimaryWatch) => PrimaryWatch | undefined
  /** Redis Cluster: what the subscriber does when its server drops the subscription (subscriber.ts; default: gives the connection up) */
  onSlotLeft?: SubscriberOptions['onSlotLeft']
}

export interface RedisBus extends InvalidationBus {
  readonly nodeId: string
}

/**
 * The invalidation bus over Redis pub/sub, made strict. Its parts, by concern:
 * - connection/: how every connection reaches Redis, and with Sentinel which server is the
 *   primary (sentinel-watch.ts) and whether it vouches for ours (primary-vouching.ts);
 * - subscription/: the subscriber connection, its lease (lease.ts) and heartbeat;
 * - publishing/: the node registry and publish with acknowledgements;
 * - messages/: the authenticated messages, and what a node does with those it receives;
 * - catch-up.ts: the change log read after each new subscription and periodically.
 * This file wires them, and keeps the epochs. See docs/how-it-works.md, "Many nodes over Redis".
 */
export function createRedisBus(options: RedisBusOptions): RedisBus {
  const { leaseMs } = options
  const connection: RedisConnection = options.connection ?? { kind: 'url', url: options.url ?? '' }
  // On a Cluster every key and channel of the bus hashes to the slot of `{prefix}` (SPEC §11).
  const prefix = connection.kind === 'cluster' ? `{${options.prefix ?? 'chat-auth'}}` : (options.prefix ?? 'chat-auth')
  const nodeId = options.nodeId ?? randomBytes(8).toString('hex')
  const log = options.logger.child({ component: 'redis-bus', nodeId })
  const now = () => performance.now()
  const changesChannel = `${prefix}:changes`
  const ackChannelOf = (node: string) => `${prefix}:ack:${node}`
  const ackChannel = ackChannelOf(nodeId)
  const questionChannel = `${prefix}:questions`
  const connectTimeoutMs = Math.max(1000, leaseMs * 2)
  const warn = throttledLog(log, now)
  let closed = false
  let started = false

  const trust = new Trust(leaseMs, leaseMs * 3)
  const count = createBusMetrics(options.metrics, { subscribed: () => trust.isSubscribed(), registered: () => trust.registeredAt(now()), trusted: () => trusted(), epoch: () => listeners.epoch() })
  const listeners = createListeners(count, log)
  const { deliver, newEpoch } = listeners

  const { watch, routing } = createWatch(connection, {
    slotKey: prefix,
    leaseMs,
    now,
    wrap: options.primaryWatch,
    onPrimaryChanged(address) {
      // The caches may predate what the new primary published; the former one's connections go at the next heartbeat.
      newEpoch('primary_changed')
      log.warn({ primary: address }, address === undefined ? 'no majority names the server of the bus' : 'a majority names a new server of the bus')
    },
    onError(error) {
      count.error('sentinel')
      warn(`redis ${connection.kind} watch connection error`, { err: error.message })
    },
  })
  const owner = () => routing?.primaryAddress()

  // ── publishing: the registry on the command connection, publish with acks ───
  const registry = createRegistry({
    connection,
    owner,
    prefix,
    nodeId,
    ttlMs: trust.registrationTtlMs,
    connectTimeoutMs,
    now,
    onRegistered({ runId, wasPresent }, sentAt) {
      if (trust.registeredAt(sentAt) && !wasPresent) {
        count.error('registration_lost')
        warn('our registry entry had gone before it expired (removed on Redis?)', { runId })
      }
      trust.registered(runId, sentAt)
    },
    onError(operation, error) {
      count.error(operation)
      warn(operation === 'register' ? 'registration failed' : 'redis command connection error', { err: error.message })
    },
  })
  const codec = createMessageCodec(prefix, options.keys)
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
      // A node that did not acknowledge in time is overloaded, stalled or cut off: its caches stopped serving, and an operator wants to know.
      else if (missing.length) warn('waited out the lease of nodes that did not acknowledge (repeats within 5 s are not logged; chat_auth_bus_publishes_total counts them)', { missing })
    },
  })

  // ── receiving: messages, the catch-up, the subscription that carries them ───
  const inbox = createInbox({
    codec,
    nodeId,
    count,
    warn,
    apply: deliver,
    flush: newEpoch,
    sendAck: (writer, payload) => registry.publishAck(ackChannelOf(writer), payload),
    acked: (ack) => publisher.acked(ack),
  })
  const catchUp = createCatchUp({ changeLog: options.changeLog, log, metrics: options.metrics, warn, deliver, newEpoch, everyMs: options.catchUpEveryMs })
  const board = createBoard({ registry, codec, nodeId, ackChannelOf, waitMs: Math.max(1000, leaseMs * 2), warn })
  const subscriber = createSubscriber({ connection, owner, name: `${prefix}:sub:${nodeId}`, channels: [changesChannel, ackChannel, questionChannel], connectTimeoutMs, ...(options.onSlotLeft ? { onSlotLeft: options.onSlotLeft } : {}) }, now)
  const primary = createPrimaryVouching({ watch, routing, subscriber, registry })
  const heartbeat = createHeartbeat({ leaseMs, connectTimeoutMs, now, trust, subscriber, registry, primary })

  const trusted = (): boolean => {
    if (closed || !catchUp.caughtUp()) return false
    const at = now()
    return trust.trustedAt(at) && primary.vouched(at)
  }

  function subscribe(): void {
    subscriber.start({
      subscribed(runId) {
        // From here on every change reaches us; what the caches hold from before may not
        // have been followed, and fills in flight may have read before a change we missed.
        trust.subscribed(runId)
        catchUp.subscribed()
        log.info({ runId }, 'invalidation channel subscribed')
        heartbeat.ping()
        if (!trust.registeredAt(now()) || trust.until() === 0) registry.renew()
      },
      message(channel, payload) {
        if (channel === changesChannel) inbox.change(payload)
        // an answer to one of our questions shares the ack channel: routed by its type, authenticated by the board
        else if (channel === ackChannel) isAnswer(payload) ? board.answered(payload) : inbox.ack(payload)
        else if (channel === questionChannel) board.questioned(payload)
      },
      pong: () => trust.pongReceived(),
      lost(reason, error) {
        const wasSubscribed = trust.isSubscribed()
        trust.lost()
        count.reconnect(reason)
        if (wasSubscribed) log.warn({ reason, err: error?.message }, 'invalidation channel lost')
        else warn('invalidation channel unavailable', { reason, err: error?.message })
        catchUp.lost(reason)
      },
      error(error) {
        count.error('connection')
        warn('redis subscriber connection error', { err: error.message })
      },
    })
  }

  return {
    nodeId,
    async start() {
      if (started) return
      started = true
      registry.connect()
      subscribe()
      primary.poll()
      heartbeat.start()
      // A node may serve (from the store) before the channel vouches for its cache; give it
      // a moment to do so, but never refuse to start because Redis is away.
      const until = now() + Math.max(2000, leaseMs * 4)
      while (!closed && !trusted() && now() < until) await sleep(10)
      if (!trusted()) log.warn('invalidation channel not trusted yet; serving from the store until it is')
    },
    async publish(change) {
      // The change is committed: our own caches may have it at once; what our handlers must
      // finish before the write answers runs beside the other nodes' acknowledgements.
      const startedAt = now()
      const applied = deliver(change)
      const here = applied instanceof Promise ? applied.then((result) => ({ result, afterMs: Math.round(now() - startedAt) })) : { result: applied, afterMs: 0 }
      const [local, published] = await Promise.all([here, publisher.publish(rowChanged(change))])
      return receiptOf(published, nodeId, local)
    },
    onChange: listeners.onChange,
    onEpochChange: listeners.onEpochChange,
    trusted,
    health: (): BusHealth => ({ ready: trusted(), trusted: trusted(), epoch: listeners.epoch(), changeLogReadAt: catchUp.readAt(), redis: { follows: registry.address(), subscribed: trust.isSubscribed() } }),
    board,
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
