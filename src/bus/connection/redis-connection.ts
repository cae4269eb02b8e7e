import type { Socket } from 'node:net'
import { Redis, type RedisOptions } from 'ioredis'
import type { RedisConnection, SentinelAddress } from '../../config.js'

/**
 * The one place where the service's ioredis instances get their connection options: a
 * URL (`redis://`, `rediss://`), or Sentinel mode — ioredis asks the sentinels for the
 * primary, checks on every connect that the server it reached says `role:master` (its
 * ready check), and asks again on every reconnect, so a reconnect after a failover lands
 * on the new primary. Each caller adds only the behaviour of its own connection
 * (retries, offline queue, timeouts).
 */
export function createRedisClient(connection: RedisConnection, behaviour: RedisOptions): Redis {
  if (connection.kind === 'url') return new Redis(connection.url, behaviour)
  const tls = connection.tls ? {} : undefined
  return new Redis({
    sentinels: connection.sentinels.map(({ host, port }) => ({ host, port })),
    name: connection.name,
    role: 'master',
    sentinelUsername: connection.sentinelUsername,
    sentinelPassword: connection.sentinelPassword,
    username: connection.username,
    password: connection.password,
    ...(tls ? { tls, sentinelTLS: tls, enableTLSForSentinelMode: true } : {}),
    ...behaviour,
  })
}

/** A plain connection to one sentinel (for SENTINEL commands), with the sentinels' credentials and TLS. */
export function createSentinelClient(connection: Extract<RedisConnection, { kind: 'sentinel' }>, sentinel: SentinelAddress, behaviour: RedisOptions): Redis {
  return new Redis({
    host: sentinel.host,
    port: sentinel.port,
    username: connection.sentinelUsername,
    password: connection.sentinelPassword,
    ...(connection.tls ? { tls: {} } : {}),
    ...behaviour,
  })
}

/** `host:port` as a sentinel would name it, or the server this client's socket is connected to now. */
export function serverAddress(host: string, port: number | string): string {
  const plain = host.startsWith('::ffff:') && host.includes('.') ? host.slice(7) : host
  return `${plain.toLowerCase()}:${port}`
}

/** The address of the server the client is connected to, or undefined while it is not. */
export function connectedAddress(redis: Redis): string | undefined {
  const stream = (redis as unknown as { stream?: Socket }).stream
  if (!stream || stream.remoteAddress === undefined || stream.remotePort === undefined) return undefined
  return serverAddress(stream.remoteAddress, stream.remotePort)
}
