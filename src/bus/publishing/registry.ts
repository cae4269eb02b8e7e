import type { Redis } from 'ioredis'
import type { RedisConnection } from '../../config.js'
import { connectedAddress, createRedisClient } from '../connection/redis-connection.js'

/**
 * The node's command connection (ioredis, reconnecting, but failing fast: nothing is queued
 * for later or re-sent behind our back), the node registry on Redis and the scripts that
 * read it: each node keeps itself in a
 * sorted set scored with an expiry taken from Redis TIME; a publish reads the registry in
 * the same script as its PUBLISH, so the set of nodes it waits for is the set registered
 * at the instant the message went out.
 *
 * Both scripts read the instance's run_id: a registration is only worth anything on the
 * Redis process that made it, and a process younger than a lease may not know every node.
 * Its age is the larger of two lower bounds: whole seconds of uptime, and the time since
 * the first of our scripts ran on it (the born key, per run_id).
 */
export interface PublishReply {
  /** subscribers that received the message (PUBLISH's answer) */
  receivers: number
  instanceAgeMs: number
  /** nodes registered when the message went out */
  nodes: string[]
  /** host:port of the server that ran the publish (undefined if the connection closed meanwhile) */
  address: string | undefined
}

export interface Registration {
  runId: string
  /** false: our entry had gone (expired, or removed by someone else) before this renewal */
  wasPresent: boolean
}

export interface RegistryOptions {
  connection: RedisConnection
  /** Redis Cluster: the master of the bus's slot, where each connection goes (connection/watch.ts) */
  owner?: () => string | undefined
  prefix: string
  nodeId: string
  /** how long an entry lives on Redis's clock after each renewal */
  ttlMs: number
  connectTimeoutMs: number
  now: () => number
  /** a renewal sent at `sentAt` (our clock) ran on the Redis instance `runId` */
  onRegistered(registration: Registration, sentAt: number): void
  onError(operation: 'register' | 'connection', error: Error): void
}

export interface Registry {
  connect(): void
  /** Renews our entry (one renewal in flight at a time, or a stuck one given up on). */
  renew(): void
  publish(payload: string): Promise<PublishReply>
  /** Publishes on another node's ack channel; rejects when the connection is not ready. */
  publishAck(channel: string, payload: string): Promise<unknown>
  /** Publishes a question to every node; the nodes registered when it went out. */
  publishQuestion(payload: string): Promise<string[]>
  /** Writes our status beside the registry (board.ts). */
  writeStatus(status: string): Promise<void>
  /** The live nodes of the registry, with the status each wrote (undefined: none yet). */
  statuses(): Promise<Array<{ nodeId: string; status: string | undefined }>>
  /** host:port of the server the command connection is on now */
  address(): string | undefined
  /** Drops the command connection and makes a new one (Sentinel: to the primary named now). */
  reconnect(): void
  deregister(): Promise<void>
  close(): void
}

const PRELUDE = `
local info = redis.call('INFO', 'server')
local runid = string.match(info, 'run_id:(%x+)')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local bornKey = KEYS[3] .. runid
redis.call('SET', bornKey, now, 'NX', 'PX', 86400000)
`
/** KEYS: registry, (unused), born prefix. ARGV: node id, ttl ms. → {run_id, was present (0/1)} */
const REGISTER_LUA = `${PRELUDE}
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
local present = 0
if score and tonumber(score) >= now then present = 1 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 600000)
return {runid, present}`
/** KEYS: registry, channel, born prefix. ARGV: payload. → {receivers, instance age ms, registered nodes} */
const PUBLISH_LUA = `${PRELUDE}
local age = now - tonumber(redis.call('GET', bornKey))
local uptime = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) * 1000
if uptime > age then age = uptime end
local receivers = redis.call('PUBLISH', KEYS[2], ARGV[1])
local nodes = redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')
return {receivers, age, nodes}`
const DEREGISTER_LUA = `return redis.call('ZREM', KEYS[1], ARGV[1])`
/** KEYS: registry, statuses. → {live node ids, their statuses (false: none)}; the statuses of nodes no longer live are dropped. */
const STATUSES_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')
local live = {}
local statuses = {}
for i, id in ipairs(ids) do
  live[id] = true
  statuses[i] = redis.call('HGET', KEYS[2], id)
end
for _, id in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not live[id] then redis.call('HDEL', KEYS[2], id) end
end
return {ids, statuses}`

type ScriptedRedis = Redis & {
  chatAuthRegister(registry: string, unused: string, bornPrefix: string, nodeId: string, ttlMs: string): Promise<[string, number]>
  chatAuthPublish(registry: string, channel: string, bornPrefix: string, payload: string): Promise<[number, number, string[]]>
  chatAuthDeregister(registry: string, nodeId: string): Promise<number>
  chatAuthStatuses(registry: string, statuses: string): Promise<[string[], Array<string | null>]>
}

export function createRegistry(options: RegistryOptions): Registry {
  const { prefix, nodeId, now } = options
  const redis = createRedisClient(
    options.connection,
    {
    lazyConnect: true,
    connectionName: `${prefix}:cmd:${nodeId}`,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    connectTimeout: options.connectTimeoutMs,
    retryStrategy: (attempt) => Math.min(500, 25 * 2 ** Math.min(attempt, 5)),
    },
    options.owner,
  ) as ScriptedRedis
  // On a Cluster the channels are sharded: SPUBLISH, in the slot of the registry (SPEC §11).
  const sharded = options.connection.kind === 'cluster'
  redis.defineCommand('chatAuthRegister', { numberOfKeys: 3, lua: REGISTER_LUA })
  redis.defineCommand('chatAuthPublish', { numberOfKeys: 3, lua: sharded ? PUBLISH_LUA.replace("redis.call('PUBLISH'", "redis.call('SPUBLISH'") : PUBLISH_LUA })
  redis.defineCommand('chatAuthDeregister', { numberOfKeys: 1, lua: DEREGISTER_LUA })
  redis.defineCommand('chatAuthStatuses', { numberOfKeys: 2, lua: STATUSES_LUA })
  const registryKey = `${prefix}:nodes`
  const channel = `${prefix}:changes`
  const questionChannel = `${prefix}:questions`
  const statusKey = `${prefix}:status`
  const bornPrefix = `${prefix}:born:`
  let renewing = false
  let closed = false
  redis.on('error', (error: Error) => options.onError('connection', error))
  redis.on('ready', () => renew())

  function renew(): void {
    if (closed || renewing || redis.status !== 'ready') return
    renewing = true
    const sentAt = now()
    // Never wait on one stuck renewal for long: another may go out beside it.
    const unstick = setTimeout(() => (renewing = false), options.ttlMs / 1.5)
    redis
      .chatAuthRegister(registryKey, registryKey, bornPrefix, nodeId, String(options.ttlMs))
      .then(([runId, present]) => {
        if (!closed) options.onRegistered({ runId: String(runId), wasPresent: Number(present) === 1 }, sentAt)
      })
      .catch((error: Error) => options.onError('register', error))
      .finally(() => {
        clearTimeout(unstick)
        renewing = false
      })
  }

  return {
    connect: () => void redis.connect().catch(() => {}), // reported through 'error', retried by ioredis
    renew,
    async publish(payload) {
      const [receivers, instanceAgeMs, nodes] = await redis.chatAuthPublish(registryKey, channel, bornPrefix, payload)
      return { receivers: Number(receivers), instanceAgeMs: Number(instanceAgeMs), nodes: nodes.map(String), address: connectedAddress(redis) }
    },
    publishAck: (ackChannel, payload) => (sharded ? redis.spublish(ackChannel, payload) : redis.publish(ackChannel, payload)),
    async publishQuestion(payload) {
      const [, , nodes] = await redis.chatAuthPublish(registryKey, questionChannel, bornPrefix, payload)
      return nodes.map(String)
    },
    async writeStatus(status) {
      await redis.hset(statusKey, nodeId, status)
    },
    async statuses() {
      const [ids, statuses] = await redis.chatAuthStatuses(registryKey, statusKey)
      return ids.map((id, i) => ({ nodeId: String(id), status: statuses[i] ?? undefined }))
    },
    address: () => (redis.status === 'ready' ? connectedAddress(redis) : undefined),
    reconnect() {
      if (!closed && redis.status === 'ready') redis.disconnect(true)
    },
    async deregister() {
      if (redis.status === 'ready') await redis.chatAuthDeregister(registryKey, nodeId)
    },
    close() {
      closed = true
      redis.disconnect()
    },
  }
}
