import { createConnection, Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { AbstractConnector, Redis, type RedisOptions } from 'ioredis'
import type { RedisConnection, SentinelAddress } from '../../config.js'

/**
 * The one place where the service's ioredis instances get their connection options: a
 * URL (`redis://`, `rediss://`); Sentinel mode — ioredis asks the sentinels for the
 * primary, checks on every connect that the server it reached says `role:master` (its
 * ready check), and asks again on every reconnect, so a reconnect after a failover lands
 * on the new primary; or a Redis Cluster — every connect goes to the master that holds the
 * bus's slot as `owner()` names it now (cluster-watch.ts), so a reconnect after a failover or
 * a slot migration lands on the new one. Each caller adds only the behaviour of its own
 * connection (retries, offline queue, timeouts).
 */
export function createRedisClient(connection: RedisConnection, behaviour: RedisOptions, owner?: () => string | undefined): Redis {
  if (connection.kind === 'url') return new Redis(connection.url, behaviour)
  const tls = connection.tls ? {} : undefined
  if (connection.kind === 'cluster') {
    if (owner === undefined) throw new Error('a Redis Cluster connection needs the slot owner to connect to')
    return new Redis({ Connector: slotOwnerConnector(owner, tls), username: connection.username, password: connection.password, ...behaviour })
  }
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

/**
 * ioredis's connector (its public `Connector` option) that opens each connection to the
 * address `owner()` names at that moment; with none named, the attempt fails (and is retried
 * as the connection's behaviour says).
 */
function slotOwnerConnector(owner: () => string | undefined, tls: object | undefined): ConnectorConstructor {
  return class SlotOwnerConnector extends AbstractConnector {
    constructor(options: { disconnectTimeout?: number }) {
      super(options.disconnectTimeout ?? 2000)
    }
    connect(): Promise<NetStream> {
      this.connecting = true
      const address = owner()
      return new Promise((resolve, reject) => {
        process.nextTick(() => {
          if (!this.connecting) return reject(new Error('Connection is closed.'))
          try {
            this.stream = address === undefined ? unknownOwner() : tls ? tlsConnect({ ...parseAddress(address), ...tls }) : createConnection(parseAddress(address))
          } catch (error) {
            return reject(error)
          }
          this.stream.once('error', (error: Error) => (this.firstError = error))
          resolve(this.stream)
        })
      })
    }
  } as unknown as ConnectorConstructor
}

/**
 * A connection that fails as a refused one would (an error, then closed): ioredis retries it
 * as it retries any other, where a rejected connect would end the client for good.
 */
function unknownOwner(): Socket {
  const socket = new Socket()
  setImmediate(() => socket.destroy(new Error("no master of the bus's slot is known yet (a majority of the cluster's nodes must name one)")))
  return socket
}

/** `host:port` (IPv6 hosts as they are: the last colon splits). */
export function parseAddress(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(':')
  return { host: address.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(address.slice(at + 1)) }
}

type NetStream = Socket
type ConnectorConstructor = NonNullable<RedisOptions['Connector']>

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
