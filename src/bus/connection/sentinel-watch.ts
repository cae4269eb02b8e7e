import type { RedisSentinelConnection } from '../../config.js'
import { createPrimaryWatch, type PrimaryWatch, type Voter } from './primary-watch.js'
import { createSentinelClient, serverAddress } from './redis-connection.js'

/**
 * Redis Sentinel: the primary a majority of the sentinels names (`SENTINEL MASTER <name>`:
 * its address and the config epoch of the failover that made it), by primary-watch.ts's rules.
 */
export interface SentinelWatchOptions {
  connection: RedisSentinelConnection
  leaseMs: number
  /** how long one SENTINEL MASTER may take before the next one goes out beside it */
  queryTimeoutMs: number
  now: () => number
  /** The primary a majority names changed (undefined: no majority names one). */
  onPrimaryChanged(address: string | undefined): void
  onError(error: Error): void
}

export type SentinelWatch = PrimaryWatch

export function createSentinelWatch(options: SentinelWatchOptions): SentinelWatch {
  const { connection } = options
  const voters = connection.sentinels.map((address): Voter => {
    const client = createSentinelClient(connection, address, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      enableReadyCheck: false,
      connectTimeout: Math.max(1000, options.queryTimeoutMs),
      retryStrategy: (attempt) => Math.min(500, 25 * 2 ** Math.min(attempt, 5)),
    })
    client.on('error', (error: Error) => options.onError(error))
    return {
      async ask() {
        const fields = fieldsOf(await client.call('SENTINEL', 'MASTER', connection.name))
        if (fields.ip === undefined || fields.port === undefined || fields['config-epoch'] === undefined) return undefined
        const primaryAddress = serverAddress(fields.ip, fields.port)
        return { primary: `${primaryAddress}@${fields['config-epoch']}`, address: primaryAddress }
      },
      close: () => client.disconnect(),
    }
  })
  return createPrimaryWatch({ voters, leaseMs: options.leaseMs, queryTimeoutMs: options.queryTimeoutMs, now: options.now, onPrimaryChanged: options.onPrimaryChanged })
}

/** SENTINEL MASTER's flat [field, value, …] reply as a record. */
function fieldsOf(reply: unknown): Record<string, string> {
  const fields: Record<string, string> = {}
  if (!Array.isArray(reply)) return fields
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1])
  return fields
}
