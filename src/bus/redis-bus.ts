import { randomBytes } from 'node:crypto'
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import tls from 'node:tls'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { StoreUnavailableError } from '../errors.js'
import type { Metrics } from '../metrics.js'
import type { BusHealth, Change, InvalidationBus } from './bus.js'
import { encodeCommand, RespDecoder, RespError, type RespValue } from './resp.js'

/**
 * The invalidation bus over Redis pub/sub, made strict. See "Cache coherence across nodes"
 * in the README for the guarantee and what it rests on; in short:
 *
 * - Each node owns one subscriber socket (a small RESP2 client of its own, so that nothing
 *   is carried from one connection to the next behind its back). Every loss of it, and
 *   every confirmed SUBSCRIBE, starts a new epoch: all caches are flushed and fills in
 *   flight are void.
 * - Lease: the node PINGs on that same socket. A pong proves every message Redis queued
 *   before the ping has been applied (replies are ordered), so the cache is trusted until
 *   send time of the ping + leaseMs, on the monotonic clock. A stopped, paused or cut-off
 *   node's trust lapses by itself.
 * - Registry: each node keeps itself in a Redis sorted set, scored with an expiry taken
 *   from Redis TIME, and trusts its cache only while that registration is certainly still
 *   there (and was made on the Redis instance it is subscribed to).
 * - Publish: one Lua script PUBLISHes and reads the registry at the same instant. The
 *   writer resolves once every registered node has acknowledged the message, or once a
 *   lease (plus clock-drift margin) has passed since the reply, after which no node that
 *   missed it can still be trusting its cache. If Redis cannot confirm the PUBLISH, it
 *   rejects (the caller answers 503): it never reports a change it could not deliver.
 */
export interface RedisBusOptions {
  url: string
  leaseMs: number
  logger: Logger
  metrics: Metrics
  /** channel and key prefix; all nodes of one deployment share it (default `chat-auth`) */
  prefix?: string
  /** this node's id on the bus (default: random) */
  nodeId?: string
  /**
   * UNSAFE — for the chaos test that proves its checker bites: do not flush the caches on
   * disconnect or re-subscribe. Never set this in production.
   */
  unsafeNoEpochFlush?: boolean
}

export interface RedisBus extends InvalidationBus {
  readonly nodeId: string
}

/** Allowed relative rate difference between two nodes' monotonic clocks (and Redis's). */
const CLOCK_DRIFT = 0.01
/** Fixed slack for timer and clock-reading granularity, in ms. */
const SLACK_MS = 2
/** How long Redis TIME may be trusted to agree with elapsed real time, in ms. */
const REDIS_CLOCK_SLACK_MS = 10
const RECENT_LATENCIES = 1024

type Message = { t: 'c'; id: string; from: string; c: Change }

interface SubscriberConnection {
  readonly socket: net.Socket
  readonly decoder: RespDecoder
  readonly openedAt: number
  /** replies expected before the subscribe replies: 'ok' (AUTH, CLIENT SETNAME) or 'info' */
  readonly expect: Array<'ok' | 'info'>
  /** send times of the pings whose pongs are still due, oldest first */
  readonly pings: number[]
  runId: string | undefined
  changesSubscribed: boolean
  acksSubscribed: boolean
  dead: boolean
}

interface PendingPublish {
  /** nodes that acknowledged, possibly before the PUBLISH reply told us whom to wait for */
  readonly acked: Set<string>
  onAck: (() => void) | undefined
}

interface PublishReply {
  receivers: number
  instanceAgeMs: number
  nodes: string[]
}

// Both scripts read the instance's run_id: a registration is only worth anything on the
// Redis process that made it, and a process younger than a lease may not know every node.
// Its age is the larger of two lower bounds: whole seconds of uptime, and the time since
// the first of our scripts ran on it (the born key, per run_id).
const PRELUDE = `
local info = redis.call('INFO', 'server')
local runid = string.match(info, 'run_id:(%x+)')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local bornKey = KEYS[3] .. runid
redis.call('SET', bornKey, now, 'NX', 'PX', 86400000)
`
/** KEYS: registry, (unused), born prefix. ARGV: node id, ttl ms. → run_id */
const REGISTER_LUA = `${PRELUDE}
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 600000)
return runid`
/** KEYS: registry, channel, born prefix. ARGV: payload. → {receivers, instance age ms, registered nodes} */
const PUBLISH_LUA = `${PRELUDE}
local age = now - tonumber(redis.call('GET', bornKey))
local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) * 1000
if uptime > age then age = uptime end
local receivers = redis.call('PUBLISH', KEYS[2], ARGV[1])
local nodes = redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')
return {receivers, age, nodes}`
const DEREGISTER_LUA = `return redis.call('ZREM', KEYS[1], ARGV[1])`

type ScriptedRedis = Redis & {
  chatAuthRegister(registry: string, unused: string, bornPrefix: string, nodeId: string, ttlMs: string): Promise<string>
  chatAuthPublish(registry: string, channel: string, bornPrefix: string, payload: string): Promise<[number, number, string[]]>
  chatAuthDeregister(registry: string, nodeId: string): Promise<number>
}

export function createRedisBus(options: RedisBusOptions): RedisBus {
  const { logger, metrics, leaseMs } = options
  const prefix = options.prefix ?? 'chat-auth'
  const nodeId = options.nodeId ?? randomBytes(8).toString('hex')
  const unsafeNoEpochFlush = options.unsafeNoEpochFlush === true
  const log = logger.child({ component: 'redis-bus', nodeId })
  if (unsafeNoEpochFlush) {
    log.warn('UNSAFE: caches are not flushed on reconnect (chaos-test mode)')
    options.metrics.collect('chat_auth_bus_unsafe_no_epoch_flush', '1: this node runs with a coherence defence disabled (chaos tests only)', 'gauge', () => 1)
  }

  const changesChannel = `${prefix}:changes`
  const ackChannelOf = (node: string) => `${prefix}:ack:${node}`
  const ackChannel = ackChannelOf(nodeId)
  const registryKey = `${prefix}:nodes`
  const bornPrefix = `${prefix}:born:`

  const tickMs = Math.max(10, Math.floor(leaseMs / 4))
  const registrationTtlMs = leaseMs * 3
  const deadAfterMs = leaseMs * 2
  const connectTimeoutMs = Math.max(1000, leaseMs * 2)
  const publishTimeoutMs = Math.max(1000, leaseMs * 2)
  /** after this long (writer's clock) from a PUBLISH reply, no node that missed it trusts its cache */
  const leaseWaitMs = Math.ceil((leaseMs * (1 + CLOCK_DRIFT)) / (1 - CLOCK_DRIFT)) + SLACK_MS
  /** a Redis process younger than this (its clock) may have subscribers of a previous one still trusting */
  const youthMs = leaseWaitMs + REDIS_CLOCK_SLACK_MS

  const target = parseRedisUrl(options.url)

  // ── metrics ──────────────────────────────────────────────────────────────
  const countEpoch = metrics.counter('chat_auth_bus_epoch_changes_total', 'Cache epochs started (all caches flushed), by reason')
  const countReconnect = metrics.counter('chat_auth_bus_reconnects_total', 'Subscriber connections opened after the first')
  const countMessage = metrics.counter('chat_auth_bus_messages_total', 'Messages received on the invalidation channel, by kind')
  const countPublish = metrics.counter(
    'chat_auth_bus_publishes_total',
    'Changes published, by outcome: acked (every registered node acknowledged), lease_expired (waited out the lease of a node that did not), failed (Redis could not confirm: the write answered 503)',
  )
  const latencies: number[] = []
  let latencyCursor = 0
  metrics.collect('chat_auth_bus_subscribed', '1 while the subscription to the invalidation channel is confirmed', 'gauge', () => (subscribed ? 1 : 0))
  metrics.collect('chat_auth_bus_registered', '1 while this node is certainly in the node registry', 'gauge', () =>
    regRunId !== undefined && performance.now() < registeredUntil ? 1 : 0,
  )
  metrics.collect('chat_auth_bus_trusted', '1 while the channel is proven alive (lease held) and caches may be served', 'gauge', () =>
    trusted() ? 1 : 0,
  )
  metrics.collect('chat_auth_bus_epoch', 'Current cache epoch of this node', 'gauge', () => epoch)
  metrics.collect(
    'chat_auth_bus_ack_latency_seconds',
    'Time from publish to every registered node acknowledging (or the lease running out), over the last 1024 publishes',
    'gauge',
    () => quantiles(latencies).map(([quantile, value]) => ({ labels: { quantile }, value })),
  )
  const recordLatency = (ms: number) => {
    latencies[latencyCursor] = ms / 1000
    latencyCursor = (latencyCursor + 1) % RECENT_LATENCIES
  }

  // ── state ────────────────────────────────────────────────────────────────
  const changeHandlers: Array<(change: Change) => void> = []
  const epochHandlers: Array<() => void> = []
  const pending = new Map<string, PendingPublish>()
  const inFlight = new Set<Promise<unknown>>()
  let closed = false
  let started = false
  let epoch = 0
  let publishCounter = 0

  let current: SubscriberConnection | undefined
  let connections = 0
  let reconnectAttempt = 0
  let reconnectTimer: NodeJS.Timeout | undefined
  let subscribed = false
  /** monotonic ms until which the pongs vouch for the channel */
  let leaseUntil = 0
  /** monotonic ms until which our registration is certainly in the registry of `regRunId` */
  let registeredUntil = 0
  let regRunId: string | undefined
  let registering = false
  /** min(leaseUntil, registeredUntil), or 0 when the two were not made on the same Redis */
  let trustUntil = 0
  let lastTick = performance.now()
  let tickTimer: NodeJS.Timeout | undefined

  const trusted = (): boolean => subscribed && performance.now() < trustUntil

  function recomputeTrust(): void {
    trustUntil = subscribed && current?.runId !== undefined && current.runId === regRunId ? Math.min(leaseUntil, registeredUntil) : 0
  }

  function newEpoch(reason: string): void {
    epoch++
    countEpoch({ reason })
    if (unsafeNoEpochFlush) return
    for (const handler of epochHandlers) {
      try {
        handler()
      } catch (error) {
        log.error({ err: error }, 'epoch handler failed')
      }
    }
  }

  function deliver(change: Change): void {
    for (const handler of changeHandlers) {
      try {
        handler(change)
      } catch (error) {
        // A change we could not apply may leave a stale entry: start afresh.
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
  }) as ScriptedRedis
  cmd.defineCommand('chatAuthRegister', { numberOfKeys: 3, lua: REGISTER_LUA })
  cmd.defineCommand('chatAuthPublish', { numberOfKeys: 3, lua: PUBLISH_LUA })
  cmd.defineCommand('chatAuthDeregister', { numberOfKeys: 1, lua: DEREGISTER_LUA })
  let cmdErrorLogged = 0
  cmd.on('error', (error: Error) => {
    const now = performance.now()
    if (now - cmdErrorLogged > 5000) {
      cmdErrorLogged = now
      log.warn({ err: error.message }, 'redis command connection error')
    }
  })
  cmd.on('ready', () => register())

  function register(): void {
    if (closed || registering || cmd.status !== 'ready') return
    registering = true
    const sentAt = performance.now()
    const done = () => {
      registering = false
    }
    // Never wait on one stuck registration for long: another may go out beside it.
    const unstick = setTimeout(done, deadAfterMs)
    cmd
      .chatAuthRegister(registryKey, registryKey, bornPrefix, nodeId, String(registrationTtlMs))
      .then((runId) => {
        if (closed) return
        // Redis ran it no earlier than sentAt: the entry lives at least ttl from then.
        const until = sentAt + registrationTtlMs * (1 - CLOCK_DRIFT) - SLACK_MS
        if (runId !== regRunId) {
          regRunId = runId
          registeredUntil = until
        } else {
          registeredUntil = Math.max(registeredUntil, until)
        }
        recomputeTrust()
      })
      .catch(() => {})
      .finally(() => {
        clearTimeout(unstick)
        done()
      })
  }

  // ── subscriber connection ────────────────────────────────────────────────
  function connect(): void {
    reconnectTimer = undefined
    if (closed) return
    if (connections++ > 0) countReconnect()
    const socket: net.Socket = target.tls
      ? tls.connect({ host: target.host, port: target.port, servername: target.host })
      : net.connect({ host: target.host, port: target.port })
    const conn: SubscriberConnection = {
      socket,
      decoder: new RespDecoder(),
      openedAt: performance.now(),
      expect: [],
      pings: [],
      runId: undefined,
      changesSubscribed: false,
      acksSubscribed: false,
      dead: false,
    }
    current = conn
    socket.setNoDelay(true)
    socket.setKeepAlive(true, 1000)
    socket.once(target.tls ? 'secureConnect' : 'connect', () => {
      if (conn.dead) return
      const commands: string[][] = []
      if (target.password !== undefined) {
        commands.push(target.username !== undefined ? ['AUTH', target.username, target.password] : ['AUTH', target.password])
        conn.expect.push('ok')
      }
      commands.push(['CLIENT', 'SETNAME', `${prefix}:sub:${nodeId}`])
      conn.expect.push('ok')
      commands.push(['INFO', 'server'])
      conn.expect.push('info')
      commands.push(['SUBSCRIBE', changesChannel, ackChannel])
      socket.write(Buffer.concat(commands.map(encodeCommand)))
    })
    socket.on('data', (chunk: Buffer) => {
      if (conn.dead) return
      try {
        conn.decoder.push(chunk, (reply) => {
          if (!conn.dead) onReply(conn, reply)
        })
      } catch (error) {
        lose(conn, 'protocol_error', error)
      }
    })
    socket.on('error', (error) => lose(conn, 'error', error))
    socket.on('close', () => lose(conn, 'closed'))
  }

  /** The subscriber connection is gone or no longer believed: whatever it did not deliver is lost. */
  function lose(conn: SubscriberConnection, reason: string, error?: unknown): void {
    if (conn.dead) return
    conn.dead = true
    conn.socket.destroy()
    const wasSubscribed = subscribed
    subscribed = false
    leaseUntil = 0
    recomputeTrust()
    if (!closed) {
      const level = wasSubscribed ? 'warn' : 'debug'
      log[level]({ reason, err: error instanceof Error ? error.message : undefined }, 'invalidation channel lost')
    }
    newEpoch(reason)
    if (!closed && !reconnectTimer) {
      const delay = Math.min(500, 20 * 2 ** Math.min(reconnectAttempt++, 5)) * (0.5 + Math.random() / 2)
      reconnectTimer = setTimeout(connect, delay)
    }
  }

  function onReply(conn: SubscriberConnection, reply: RespValue): void {
    if (reply instanceof RespError) {
      lose(conn, 'error_reply', reply)
      return
    }
    if (!Array.isArray(reply)) {
      const expected = conn.expect.shift()
      if (expected === 'info' && typeof reply === 'string') conn.runId = /run_id:([0-9a-f]+)/.exec(reply)?.[1]
      return
    }
    switch (reply[0]) {
      case 'message':
        if (typeof reply[1] === 'string' && typeof reply[2] === 'string') onMessage(reply[1], reply[2])
        return
      case 'pong': {
        const sentAt = conn.pings.shift()
        if (sentAt !== undefined && subscribed) {
          // Every message Redis had queued for us before this ping has been applied.
          leaseUntil = Math.max(leaseUntil, sentAt + leaseMs)
          recomputeTrust()
        }
        return
      }
      case 'subscribe':
        if (reply[1] === changesChannel) {
          conn.changesSubscribed = true
          // From here on every change reaches us; what the caches hold from before may not
          // have been followed, and fills in flight may have read before a change we missed.
          newEpoch('subscribed')
        } else if (reply[1] === ackChannel) {
          conn.acksSubscribed = true
        }
        if (conn.changesSubscribed && conn.acksSubscribed && !subscribed) {
          if (conn.runId === undefined) {
            lose(conn, 'no_run_id')
            return
          }
          subscribed = true
          reconnectAttempt = 0
          log.info({ runId: conn.runId }, 'invalidation channel subscribed')
          ping(conn)
          if (regRunId !== conn.runId) register()
        }
        return
      default:
        return
    }
  }

  function ping(conn: SubscriberConnection): void {
    conn.pings.push(performance.now())
    conn.socket.write(PING)
  }

  function onMessage(channel: string, payload: string): void {
    if (channel === ackChannel) {
      countMessage({ kind: 'ack' })
      const space = payload.indexOf(' ')
      const entry = pending.get(payload.slice(0, space))
      if (entry) {
        entry.acked.add(payload.slice(space + 1))
        entry.onAck?.()
      }
      return
    }
    if (channel !== changesChannel) return
    const message = parseMessage(payload)
    if (message === 'ignore') {
      countMessage({ kind: 'other' })
      return
    }
    if (message === undefined) {
      // Something we cannot read may have been a change: do not trust what we hold.
      countMessage({ kind: 'malformed' })
      log.warn('malformed message on the invalidation channel; flushing caches')
      newEpoch('malformed_message')
      return
    }
    countMessage({ kind: 'change' })
    if (message.from === nodeId) return // applied before it was published
    deliver(message.c)
    if (cmd.status === 'ready') cmd.publish(ackChannelOf(message.from), `${message.id} ${nodeId}`).catch(() => {})
  }

  function tick(): void {
    const now = performance.now()
    // After a stall (SIGSTOP, a long GC) the socket may hold pongs not yet read: look again next tick.
    const stalled = now - lastTick > tickMs * 3 + 50
    lastTick = now
    register()
    const conn = current
    if (!conn || conn.dead || stalled) return
    if (!subscribed) {
      if (now - conn.openedAt > connectTimeoutMs) lose(conn, 'subscribe_timeout')
      return
    }
    const oldest = conn.pings[0]
    if (oldest !== undefined && now - oldest > deadAfterMs) {
      lose(conn, 'pongs_missed')
      return
    }
    ping(conn)
  }

  // ── publish ──────────────────────────────────────────────────────────────
  async function publishOnce(payload: string, deadline: number): Promise<PublishReply> {
    for (let attempt = 0; ; attempt++) {
      if (closed) throw new StoreUnavailableError('invalidation bus closed')
      const remaining = deadline - performance.now()
      if (remaining <= 0) throw new StoreUnavailableError('invalidation channel unavailable: publish not confirmed')
      try {
        const [receivers, instanceAgeMs, nodes] = await withTimeout(cmd.chatAuthPublish(registryKey, changesChannel, bornPrefix, payload), remaining)
        return { receivers: Number(receivers), instanceAgeMs: Number(instanceAgeMs), nodes: nodes.map(String) }
      } catch (error) {
        if (error instanceof StoreUnavailableError) throw error
        if (attempt === 0) log.warn({ err: (error as Error).message }, 'publish failed; retrying')
        await sleep(Math.min(50, Math.max(0, deadline - performance.now())))
      }
    }
  }

  async function publish(change: Change): Promise<void> {
    const startedAt = performance.now()
    // The change is committed: our own caches may have it at once.
    deliver(change)
    const id = `${nodeId}.${++publishCounter}`
    const payload = JSON.stringify({ t: 'c', id, from: nodeId, c: change } satisfies Message)
    const entry: PendingPublish = { acked: new Set(), onAck: undefined }
    pending.set(id, entry)
    try {
      let reply: PublishReply
      try {
        reply = await publishOnce(payload, startedAt + publishTimeoutMs)
      } catch (error) {
        countPublish({ outcome: 'failed' })
        log.error({ err: (error as Error).message, kind: change.kind }, 'change committed but not published: the write fails')
        throw error instanceof StoreUnavailableError ? error : new StoreUnavailableError('invalidation channel unavailable', { cause: error })
      }
      const repliedAt = performance.now()
      const waitFor = reply.nodes.filter((node) => node !== nodeId)
      const leaseDeadline = repliedAt + leaseWaitMs
      // A young Redis process cannot know the nodes still subscribed to its predecessor.
      const youthDeadline = reply.instanceAgeMs < youthMs ? repliedAt + (youthMs - reply.instanceAgeMs) : 0
      const allAcked = await waitForAcks(entry, waitFor, leaseDeadline)
      if (performance.now() < youthDeadline) await sleep(youthDeadline - performance.now())
      countPublish({ outcome: allAcked ? 'acked' : 'lease_expired' })
      if (!allAcked) log.debug({ missing: waitFor.filter((n) => !entry.acked.has(n)) }, 'waited out the lease of nodes that did not acknowledge')
      recordLatency(performance.now() - startedAt)
    } finally {
      pending.delete(id)
    }
  }

  function waitForAcks(entry: PendingPublish, waitFor: string[], deadline: number): Promise<boolean> {
    const complete = () => waitFor.every((node) => entry.acked.has(node))
    if (complete()) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        entry.onAck = undefined
        resolve(complete())
      }, Math.max(0, deadline - performance.now()))
      entry.onAck = () => {
        if (!complete()) return
        clearTimeout(timer)
        entry.onAck = undefined
        resolve(true)
      }
    })
  }

  return {
    nodeId,
    async start() {
      if (started) return
      started = true
      cmd.connect().catch(() => {})
      connect()
      tickTimer = setInterval(tick, tickMs)
      // A node may serve (from the store) before the channel vouches for its cache; give it
      // a moment to do so, but never refuse to start because Redis is away.
      const until = performance.now() + Math.max(2000, leaseMs * 4)
      while (!closed && !trusted() && performance.now() < until) await sleep(10)
      if (!trusted()) log.warn('invalidation channel not trusted yet; serving from the store until it is')
    },
    publish(change) {
      const promise = publish(change)
      inFlight.add(promise)
      const forget = () => inFlight.delete(promise)
      promise.then(forget, forget)
      return promise
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
      subscribed = false
      recomputeTrust()
      if (reconnectTimer) clearTimeout(reconnectTimer)
      if (tickTimer) clearInterval(tickTimer)
      await Promise.allSettled([...inFlight])
      if (cmd.status === 'ready') await withTimeout(cmd.chatAuthDeregister(registryKey, nodeId), 500).catch(() => {})
      if (current) lose(current, 'closed')
      cmd.disconnect()
    },
  }
}

const PING = encodeCommand(['PING'])

function parseMessage(payload: string): Message | 'ignore' | undefined {
  let message: unknown
  try {
    message = JSON.parse(payload)
  } catch {
    return undefined
  }
  if (typeof message !== 'object' || message === null) return undefined
  const { t, id, from, c } = message as Record<string, unknown>
  if (t !== 'c') return typeof t === 'string' ? 'ignore' : undefined
  if (typeof id !== 'string' || typeof from !== 'string' || !isChange(c)) return undefined
  return message as Message
}

function isChange(value: unknown): value is Change {
  if (typeof value !== 'object' || value === null) return false
  const change = value as Record<string, unknown>
  if (change.kind === 'apiKey') return typeof change.keyId === 'string' && Number.isFinite(change.revision)
  if (change.kind !== 'user' && change.kind !== 'agent') return false
  const state = change.state as Record<string, unknown> | null
  return typeof state === 'object' && state !== null && typeof state.id === 'string' && Number.isFinite(state.revision)
}

interface RedisTarget {
  host: string
  port: number
  tls: boolean
  username: string | undefined
  password: string | undefined
}

function parseRedisUrl(text: string): RedisTarget {
  const url = new URL(text)
  const decode = (part: string) => (part === '' ? undefined : decodeURIComponent(part))
  return {
    host: url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1',
    port: url.port ? Number(url.port) : 6379,
    tls: url.protocol === 'rediss:',
    username: decode(url.username),
    password: decode(url.password),
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

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${Math.round(ms)} ms`)), ms)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
