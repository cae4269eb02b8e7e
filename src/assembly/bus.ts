import type { Logger } from 'pino'
import type { Config, JwtKeyConfig } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { ChangeLog, InvalidationBus } from '../bus/bus.js'
import { createMemoryBus } from '../bus/memory-bus.js'
import type { RedisBusOptions } from '../bus/redis-bus.js'
import { claimedBus } from '../bus/claimed-bus.js'
import type { DatabaseClaim } from '../store/database-claim.js'
import type { EventHub } from '../stream/hub.js'
import type { Store } from '../store/store.js'
import type { StatesOptions } from '../cache/states.js'
import type { ChangeSteps } from '../change-pipeline.js'
import type { OnClose } from './lifecycle.js'

/** More missed changes than this and a flush is cheaper than evicting them one by one. */
const CATCH_UP_LIMIT = 50_000

/**
 * Parts of a node a test may wrap or replace: the chaos test builds its mutants this way
 * (test/chaos/lib/mutants.mjs), and no configuration can reach them.
 */
export interface NodeParts {
  /** wraps the change log the bus reads (catch-up) */
  changeLog?: (changeLog: ChangeLog) => ChangeLog
  /** wraps the bus the caches and writes use */
  bus?: (bus: InvalidationBus) => InvalidationBus
  /** wraps (or, returning undefined, removes) what tells a Sentinel or Cluster node which server the bus must be on */
  primaryWatch?: RedisBusOptions['primaryWatch']
  /** replaces what a Cluster node's subscriber does when its server drops the subscription (default: gives the connection up) */
  onSlotLeft?: RedisBusOptions['onSlotLeft']
  /** how often a subscribed node reads the change log again */
  catchUpEveryMs?: number
  /** the revoked-token filter's tuning, or filters wrapped (cache/revoked-tokens.ts) */
  revokedTokens?: StatesOptions['revokedTokens']
  /** wraps the store every part after it uses (caches, writes, housekeeping) */
  store?: (store: Store) => Store
  /** wraps the hub of the node's event streams (stream/hub.ts) */
  eventHub?: (hub: EventHub) => EventHub
  /** wraps the steps a committed change takes on the node (change-pipeline.ts) */
  changeSteps?: (steps: ChangeSteps) => ChangeSteps
}

export interface BusOptions {
  logger: Logger
  metrics: Metrics
  store: Pick<Store, 'changesSince'>
  jwtKeys: JwtKeyConfig[]
  claim: DatabaseClaim | undefined
  /** a bus handed in (tests); by default in-process, or Redis when configured */
  bus?: InvalidationBus | undefined
  parts?: NodeParts | undefined
}

/**
 * The invalidation bus: in-process for one node, Redis for many (reading the store's change
 * log after a reconnect and while subscribed), under the node's claim on the database.
 * Started here; closed before the store.
 */
export async function openBus(onClose: OnClose, config: Config, options: BusOptions): Promise<InvalidationBus> {
  const { parts = {} } = options
  const made = options.bus ?? (await configuredBus(config, options, parts))
  onClose(() => made.close())
  const claimed = options.claim ? claimedBus(made, options.claim) : made
  const bus = parts.bus ? parts.bus(claimed) : claimed
  await bus.start()
  return bus
}

async function configuredBus(config: Config, options: BusOptions, parts: NodeParts): Promise<InvalidationBus> {
  if (!config.redis) return createMemoryBus({ logger: options.logger })
  const log: ChangeLog = { since: (cursor) => options.store.changesSince(cursor, CATCH_UP_LIMIT) }
  const { createRedisBus } = await import('../bus/redis-bus.js')
  const { deriveBusKeys } = await import('../bus/messages/messages.js')
  return createRedisBus({
    connection: config.redis,
    leaseMs: config.leaseMs,
    prefix: config.redisPrefix,
    logger: options.logger,
    metrics: options.metrics,
    // Messages are authenticated with keys derived from the JWT keys: see docs/security.md.
    keys: deriveBusKeys(options.jwtKeys),
    changeLog: parts.changeLog ? parts.changeLog(log) : log,
    ...(parts.catchUpEveryMs !== undefined ? { catchUpEveryMs: parts.catchUpEveryMs } : {}),
    ...(parts.primaryWatch ? { primaryWatch: parts.primaryWatch } : {}),
    ...(parts.onSlotLeft ? { onSlotLeft: parts.onSlotLeft } : {}),
  })
}
