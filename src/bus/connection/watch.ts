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
  /** wraps the watch the connection calls for (a test's; undefined: none checks the node's trust and writes) */
  wrap?: ((watch: PrimaryWatch) => PrimaryWatch | undefined) | undefined
}

/**
 * Which server the bus must be on, for the shapes where it can move: the primary a majority
 * of sentinels names (Sentinel), or the master of the bus's slot a majority of the cluster's
 * nodes names (Cluster). One Redis server has nothing to watch.
 */
export function createWatch(connection: RedisConnection, options: WatchOptions): Watches {
  if (connection.kind === 'url') return { watch: undefined, routing: undefined }
  const common = { leaseMs: options.leaseMs, queryTimeoutMs: options.leaseMs, now: options.now, onPrimaryChanged: options.onPrimaryChanged, onError: options.onError }
  const made = connection.kind === 'sentinel' ? createSentinelWatch({ connection, ...common }) : createClusterWatch({ connection, slotKey: options.slotKey, ...common })
  const watch = options.wrap ? options.wrap(made) : made
  // A Cluster's connections can find the slot's master no other way: they follow the
  // watch even when a test took it out of the node's trust and writes.
  return { watch, routing: connection.kind === 'cluster' ? made : watch }
}

export interface Watches {
  /** what the node's trust and writes are checked against (undefined: nothing) */
  watch: PrimaryWatch | undefined
  /** what the bus's connections follow (Sentinel: ioredis asks the sentinels itself) */
  routing: PrimaryWatch | undefined
}
