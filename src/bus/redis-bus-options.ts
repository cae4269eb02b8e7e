import type { Logger } from 'pino'
import type { RedisConnection } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { BusKey } from './messages.js'
import type { ChangeLog } from './bus.js'

/** How to make the Redis invalidation bus (redis-bus.ts). */
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
   * The store's record of committed changes: with it, a new subscription catches up on what
   * it may have missed instead of flushing the caches (catch-up.ts). Without it,
   * every new subscription flushes.
   */
  changeLog?: ChangeLog
  /**
   * UNSAFE — only for the chaos test that proves its checker bites (through its own entry
   * point, never the configuration): do not flush the caches on a new epoch, and trust a
   * new subscription without catching up.
   */
  unsafeNoEpochFlush?: boolean
  /**
   * UNSAFE — only for the chaos test's Sentinel mutant (same entry point): trust the
   * subscribed server without asking the sentinels, and answer writes without confirming
   * the primary.
   */
  unsafeNoPrimaryCheck?: boolean
  /**
   * UNSAFE — the chaos test's second mutant: a catch-up that reads from where the new
   * subscription starts instead of from the previous horizon, so it skips every change
   * committed while the channel was lost.
   */
  unsafeCatchUpSkipsWindow?: boolean
  /**
   * UNSAFE — the chaos test's mutant of the horizon advance: move the horizon to the
   * snapshot's xmin while subscribed, ignoring changes whose publish is not confirmed (the
   * outbox) and without the PING round trip.
   */
  unsafeHorizonIgnoresOutbox?: boolean
  /** how often a caught-up subscription advances its catch-up horizon (default 5 s, at least a lease; tests shorten it) */
  horizonAdvanceMs?: number
}
