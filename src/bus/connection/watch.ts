import type { RedisConnection } from '../../config.js'
import { createClusterWatch } from './cluster-watch.js'
import type { PrimaryWatch } from './primary-watch.js'

export type { PrimaryWatch }
import { createSentinelWatch } from './sentinel-watch.js'

export interface WatchOptions {
  /** the key whose hash slot the bus lives in (Redis Cluster) */
  slotKey: string
  leaseMs: number
  now: () => number
  /** the primary (or the slot's master) a majority names changed: what the caches hold may predate what is published there */
  onPrimaryChanged(address: string | undefined): void
  onError(error: Error): void
}

/**
 * Which server the bus must be on, for the shapes where it can move: the primary a majority
 * of sentinels names (Sentinel), or the master of the bus's slot a majority of the cluster's
 * nodes names (Cluster). One Redis server has nothing to watch.
 */
export function createWatch(connection: RedisConnection, options: WatchOptions): PrimaryWatch | undefined {
  if (connection.kind === 'url') return undefined
  const common = { leaseMs: options.leaseMs, queryTimeoutMs: options.leaseMs, now: options.now, onPrimaryChanged: options.onPrimaryChanged, onError: options.onError }
  return connection.kind === 'sentinel' ? createSentinelWatch({ connection, ...common }) : createClusterWatch({ connection, slotKey: options.slotKey, ...common })
}
