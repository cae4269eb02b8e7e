import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { LRUCache } from 'lru-cache'
import type { Logger } from 'pino'
import type { Metrics } from '../metrics.js'
import { rowChanged, type BusHealth, type Change, type InvalidationBus, type RowChanged } from './bus.js'
import { Trust, writerWaitMs, youthMs } from './lease.js'
import { createMessageCodec, type BusKey, type Rejection } from './messages.js'
import { createPublisher, sleep, withTimeout } from './publisher.js'
import { createRegistry } from './registry.js'
import { createSubscriber } from './subscriber.js'

/**
 * The invalidation bus over Redis pub/sub, made strict, from five parts: the subscriber
 * connection (subscriber.ts), the lease and trust arithmetic (lease.ts), the node registry
 * (registry.ts), publish with acknowledgements (publisher.ts) and the authenticated
 * messages (messages.ts). This file wires them: epochs, the tick, metrics, logging.
 * See "Many nodes over Redis" in the README for the guarantee and what it rests on.
 */
export interface RedisBusOptions {
  url: string
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
   * UNSAFE — only for the chaos test that proves its checker bites (through its own entry
   * point, never the configuration): do not flush the caches on a new epoch.
   */
  unsafeNoEpochFlush?: boolean
}

export interface RedisBus extends InvalidationBus {
  readonly nodeId: string
}

const RECENT_LATENCIES = 1024
/** ids of applied messages remembered, so that a replay within this window changes nothing */
const SEEN_MESSAGES = 65_536
/** at most one log line per this long for each kind of repeated failure */
const LOG_EVERY_MS = 5000

export function createRedisBus(options: RedisBusOptions): RedisBus {
  const { metrics, leaseMs } = options
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

  const codec = createMessageCodec(prefix, options.keys)
  const trust = new Trust(leaseMs, leaseMs * 3)
  const seen = new LRUCache<string, true>({ max: SEEN_MESSAGES })
  const changeHandlers: Array<(change: Change | RowChanged) => void> = []
  const epochHandlers: Array<() => void> = []
  const inFlight = new Set<Promise<unknown>>()
  const lastLogged = new Map<string, number>()
  let closed = false
  let started = false
  let epoch = 0
  let registering = false
  let lastTick = now()
  let tickTimer: NodeJS.Timeout | undefined

  /** Logs at most once per LOG_EVERY_MS for each `what`: a storm of one failure never floods. */
  const logThrottled = (level: 'warn' | 'error', what: string, fields: Record<string, unknown>) => {
    const at = now()
    if (at - (lastLogged.get(what) ?? -Infinity) < LOG_EVERY_MS) return
    lastLogged.set(what, at)
    log[level](fields, what)
  }

  // ── metrics ──────────────────────────────────────────────────────────────
  const countEpoch = metrics.counter('chat_auth_bus_epoch_changes_total', 'Cache epochs started (all caches flushed), by reason')
  const countReconnect = metrics.counter('chat_auth_bus_reconnects_total', 'Subscriber connections lost (a new one follows), by reason')
  const countMessage = metrics.counter('chat_auth_bus_messages_total', 'Authenticated messages received, by kind (change, ack, replayed)')
  const countRejected = metrics.counter(
    'chat_auth_bus_rejected_messages_total',
    'Messages refused (changed nothing, not acknowledged), by kind and reason: malformed, unknown_key (no key of ours), bad_mac (forged or tampered)',
  )
  const countErrors = metrics.counter('chat_auth_bus_errors_total', 'Failures on the bus, by operation (register, ack_publish, publish_retry, connection, handler)')
  const countPublish = metrics.counter(
    'chat_auth_bus_publishes_total',
    'Changes published, by outcome: acked (every registered node acknowledged), lease_expired (waited out the lease of a node that did not), unknown_receivers (a subscriber outside the registry: waited out the lease), failed (Redis could not confirm: the write answered 503)',
  )
  for (const reason of ['malformed', 'unknown_key', 'bad_mac'] satisfies Rejection[]) countRejected({ kind: 'change', reason }, 0)
  const latencies: number[] = []
  let latencyCursor = 0
  metrics.collect('chat_auth_bus_subscribed', '1 while the subscription to the invalidation channel is confirmed', 'gauge', () => (trust.isSubscribed() ? 1 : 0))
  metrics.collect('chat_auth_bus_registered', '1 while this node is certainly in the node registry', 'gauge', () => (trust.registeredAt(now()) ? 1 : 0))
  metrics.collect('chat_auth_bus_trusted', '1 while the channel is proven alive (lease held) and caches may be served', 'gauge', () => (trusted() ? 1 : 0))
  metrics.collect('chat_auth_bus_epoch', 'Current cache epoch of this node', 'gauge', () => epoch)
  metrics.collect(
    'chat_auth_bus_ack_latency_seconds',
    'Time from publish to every registered node acknowledging (or the lease running out), over the last 1024 publishes',
    'gauge',
    () => quantiles(latencies).map(([quantile, value]) => ({ labels: { quantile }, value })),
  )
  if (options.unsafeNoEpochFlush) {
    log.warn('UNSAFE: caches are not flushed on a new epoch (chaos-test entry point)')
    metrics.collect('chat_auth_bus_unsafe_no_epoch_flush', '1: this node runs with a coherence defence disabled (chaos tests only)', 'gauge', () => 1)
  }

  const trusted = (): boolean => !closed && trust.trustedAt(now())

  function newEpoch(reason: string): void {
    epoch++
    countEpoch({ reason })
    if (options.unsafeNoEpochFlush) return
    for (const handler of epochHandlers) {
      try {
        handler()
      } catch (error) {
        countErrors({ operation: 'handler' })
        log.error({ err: error }, 'epoch handler failed')
      }
    }
  }

  function deliver(change: Change | RowChanged): void {
    for (const handler of changeHandlers) {
      try {
        handler(change)
      } catch (error) {
        // A change we could not apply may leave a stale entry: start afresh.
        countErrors({ operation: 'handler' })
        log.error({ err: error, kind: change.kind }, 'change handler failed; flushing caches')
        newEpoch('handler_error')
      }
    }
  }

  // ── command connection (publish, acks, registry) ─────────────────────────
  const cmd = new Redis(options.url, {
    lazyConnect: true,
    connectionName: `${prefix}:cmd:${nodeId}`,
    // Fail fast: a command either reaches the connection we have or fails; nothing is
    // queued for later or re-sent behind our back (publish retries on its own terms).
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    connectTimeout: connectTimeoutMs,
    retryStrategy: (attempt) => Math.min(500, 25 * 2 ** Math.min(attempt, 5)),
  })
  cmd.on('error', (error: Error) => {
    countErrors({ operation: 'connection' })
    logThrottled('warn', 'redis command connection error', { err: error.message })
  })
  cmd.on('ready', () => register())
  const registry = createRegistry(cmd, prefix)

  function register(): void {
    if (closed || registering || cmd.status !== 'ready') return
    registering = true
    const sentAt = now()
    // Never wait on one stuck registration for long: another may go out beside it.
    const unstick = setTimeout(() => (registering = false), deadAfterMs)
    const believed = trust.registeredAt(sentAt)
    registry
      .register(nodeId, trust.registrationTtlMs)
      .then(({ runId, wasPresent }) => {
        if (closed) return
        if (believed && !wasPresent) {
          countErrors({ operation: 'registration_lost' })
          logThrottled('warn', 'our registry entry had gone before it expired (removed on Redis?)', { runId })
        }
        trust.registered(runId, sentAt)
      })
      .catch((error: Error) => {
        countErrors({ operation: 'register' })
        logThrottled('warn', 'registration failed', { err: error.message })
      })
      .finally(() => {
        clearTimeout(unstick)
        registering = false
      })
  }

  // ── publish ──────────────────────────────────────────────────────────────
  const publisher = createPublisher({
    registry,
    codec,
    nodeId,
    writerWaitMs: writerWaitMs(leaseMs),
    youthMs: youthMs(leaseMs),
    publishTimeoutMs: Math.max(1000, leaseMs * 2),
    now,
    onRetry: (error) => {
      countErrors({ operation: 'publish_retry' })
      log.warn({ err: error.message }, 'publish failed; retrying')
    },
    onOutcome: (outcome, latencyMs, missing) => {
      countPublish({ outcome })
      if (outcome === 'failed') {
        log.error('change committed but not published: the write fails')
        return
      }
      if (missing.length) log.debug({ missing }, 'waited out the lease of nodes that did not acknowledge')
      latencies[latencyCursor] = latencyMs / 1000
      latencyCursor = (latencyCursor + 1) % RECENT_LATENCIES
    },
  })

  // ── subscriber connection ────────────────────────────────────────────────
  function reject(kind: 'change' | 'ack', reason: Rejection): void {
    countRejected({ kind, reason })
    logThrottled('warn', `rejected ${kind} message${kind === 'change' ? '; caches flushed' : ''}`, { reason })
    // A change we cannot read may be a real one from a node whose keys we lack: we will
    // not acknowledge it, and we must not go on trusting what it may have made stale.
    if (kind === 'change') newEpoch(`rejected_${reason}`)
  }

  function onChangeMessage(payload: string): void {
    const read = codec.readChange(payload)
    if (!read.ok) return reject('change', read.reason)
    const { id, from, row } = read.message
    if (seen.has(id)) {
      countMessage({ kind: 'replayed' })
      return
    }
    seen.set(id, true)
    countMessage({ kind: 'change' })
    if (from === nodeId) return // applied before it was published
    deliver(row)
    if (cmd.status !== 'ready') return // the writer waits out our lease instead
    cmd.publish(ackChannelOf(from), codec.ack({ id, node: nodeId })).catch((error: Error) => {
      countErrors({ operation: 'ack_publish' })
      logThrottled('warn', 'acknowledgement not published (the writer waits out our lease)', { err: error.message })
    })
  }

  const subscriber = createSubscriber(
    { url: options.url, name: `${prefix}:sub:${nodeId}`, channels: [changesChannel, ackChannel], connectTimeoutMs },
    {
      subscribed(runId) {
        // From here on every change reaches us; what the caches hold from before may not
        // have been followed, and fills in flight may have read before a change we missed.
        trust.subscribed(runId)
        newEpoch('subscribed')
        log.info({ runId }, 'invalidation channel subscribed')
        ping()
        if (!trust.registeredAt(now()) || trust.until() === 0) register()
      },
      message(channel, payload) {
        if (channel === changesChannel) return onChangeMessage(payload)
        if (channel !== ackChannel) return
        const read = codec.readAck(payload)
        if (!read.ok) return reject('ack', read.reason)
        countMessage({ kind: 'ack' })
        publisher.acked(read.message)
      },
      pong: () => trust.pongReceived(),
      lost(reason, error) {
        const wasSubscribed = trust.isSubscribed()
        trust.lost()
        countReconnect({ reason })
        if (wasSubscribed) log.warn({ reason, err: error?.message }, 'invalidation channel lost')
        else logThrottled('warn', 'invalidation channel unavailable', { reason, err: error?.message })
        newEpoch(reason)
      },
      error(error) {
        countErrors({ operation: 'connection' })
        logThrottled('warn', 'redis subscriber connection error', { err: error.message })
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
    register()
    if (stalled) return
    if (!subscriber.isSubscribed()) {
      if (at - subscriber.openedAt() > connectTimeoutMs) subscriber.drop('subscribe_timeout')
      return
    }
    const oldest = trust.oldestPing()
    if (oldest !== undefined && at - oldest > deadAfterMs) return subscriber.drop('pongs_missed')
    ping()
  }

  function track<T>(promise: Promise<T>): Promise<T> {
    inFlight.add(promise)
    const forget = () => inFlight.delete(promise)
    promise.then(forget, forget)
    return promise
  }

  return {
    nodeId,
    async start() {
      if (started) return
      started = true
      cmd.connect().catch(() => {}) // reported through the 'error' event, retried by ioredis
      subscriber.start()
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
      return track(publisher.publish(rowChanged(change)))
    },
    onChange(handler) {
      changeHandlers.push(handler)
    },
    onEpochChange(handler) {
      epochHandlers.push(handler)
    },
    trusted,
    health(): BusHealth {
      const isTrusted = trusted()
      return { ready: isTrusted, trusted: isTrusted, epoch }
    },
    async close() {
      if (closed) return
      // Stop trusting before leaving the registry: writers stop waiting for us from then on.
      closed = true
      if (tickTimer) clearInterval(tickTimer)
      await Promise.allSettled([...inFlight])
      publisher.close()
      if (cmd.status === 'ready') {
        await withTimeout(registry.deregister(nodeId), 500).catch((error: Error) => log.warn({ err: error.message }, 'could not leave the registry; the entry expires'))
      }
      await subscriber.close()
      trust.lost()
      newEpoch('closed')
      cmd.disconnect()
    },
  }
}

function quantiles(values: number[]): Array<[string, number]> {
  if (values.length === 0) return []
  const sorted = [...values].sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!
  return [
    ['0.5', at(0.5)],
    ['0.9', at(0.9)],
    ['0.99', at(0.99)],
    ['1', sorted[sorted.length - 1]!],
  ]
}
