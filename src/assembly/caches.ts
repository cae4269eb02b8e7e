import { performance } from 'node:perf_hooks'
import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { InvalidationBus } from '../bus/bus.js'
import { createStates, type States } from '../cache/states.js'
import type { Store } from '../store/store.js'
import { throttledLog } from '../throttled-log.js'
import type { NodeParts } from './bus.js'
import type { OnClose } from './lifecycle.js'

/** users read per round of the warm-up: one batched query each (cache/miss-batcher.ts) */
const WARM_UP_CHUNK = 1000

export interface Caches {
  states: States
  /** false while the cache warm-up (WARM_UP_USERS) runs: /readyz answers 503 until it is done */
  warmedUp(): boolean
}

/** The node's caches, kept by the bus, warmed up off the start-up path, and their series on /metrics. */
export function openCaches(onClose: OnClose, config: Config, options: { store: Store; bus: InvalidationBus; metrics: Metrics; logger: Logger; parts?: NodeParts | undefined }): Caches {
  const { store, bus, metrics, logger } = options
  const loadFailed = throttledLog(logger, Date.now)
  const states = createStates(store, bus, config.cacheSize, {
    maxBytes: config.cacheMaxBytes,
    revocationFilterBytes: config.revocationFilterBytes,
    revokedTokens: {
      onLoad: (load) => logger.info(load, load.rebuild ? 'revoked tokens reloaded into a fresh filter' : 'revoked tokens loaded'),
      onLoadError: (error) => loadFailed('revoked tokens could not be loaded; tried again shortly, the store answers meanwhile', { err: error instanceof Error ? error.message : String(error) }),
      ...options.parts?.revokedTokens,
    },
  })
  onClose(() => states.close())
  registerCacheMetrics(metrics, states, bus)
  return { states, warmedUp: warmUp(config.warmUpUsers, store, states, logger).done }
}

/**
 * Reads the `users` most recently created or changed users (and their agents) into the
 * caches, through the ordinary miss path (batched, fill tickets and all), off the start-up
 * path: the node listens meanwhile and its /readyz answers 503 until it is done. A failed
 * read ends the warm-up (logged): the node then serves, filling its cache as it goes.
 */
function warmUp(users: number, store: Store, states: States, logger: Logger): { done: () => boolean } {
  if (users === 0) return { done: () => true }
  let done = false
  const started = performance.now()
  void (async () => {
    const ids = await store.recentUserIds(users)
    const agentIds = new Set<string>()
    for (let start = 0; start < ids.length; start += WARM_UP_CHUNK) {
      const read = await Promise.all(ids.slice(start, start + WARM_UP_CHUNK).map((id) => states.user(id)))
      for (const user of read) if (user) agentIds.add(user.agentId)
    }
    await Promise.all([...agentIds].map((id) => states.agent(id)))
    logger.info({ users: ids.length, agents: agentIds.size, ms: Math.round(performance.now() - started) }, 'cache warmed up')
  })()
    .catch((error: Error) => logger.warn({ err: error.message }, 'cache warm-up failed; serving with what it read'))
    .finally(() => (done = true))
  return { done: () => done }
}

function registerCacheMetrics(metrics: Metrics, states: States, bus: InvalidationBus): void {
  const caches = Object.entries(states.caches)
  const byCache = (read: (cache: States['caches'][keyof States['caches']]) => number) => () => caches.map(([cache, c]) => ({ labels: { cache }, value: read(c) }))
  metrics.collect('chat_auth_cache_hits_total', 'Cache hits by cache', 'counter', byCache((c) => c.hits), ['cache'])
  metrics.collect('chat_auth_cache_misses_total', 'Cache misses by cache', 'counter', byCache((c) => c.misses), ['cache'])
  metrics.collect('chat_auth_cache_entries', 'Entries held by cache', 'gauge', byCache((c) => c.size), ['cache'])
  metrics.collect('chat_auth_cache_bytes', 'Estimated bytes held by cache, bounded by CACHE_MAX_BYTES (userIds: the external-id index)', 'gauge', () =>
    Object.entries(states.bytes()).map(([cache, value]) => ({ labels: { cache }, value })), ['cache'])
  metrics.collect('chat_auth_cache_fills_discarded_total', 'Store reads not cached because a change or epoch raced them', 'counter', byCache((c) => c.discardedFills), ['cache'])
  const revoked = () => states.revokedTokens.stats()
  metrics.collect('chat_auth_revocation_filter_entries', 'Revoked jtis in the filter that answers (REVOCATION_FILTER_BYTES)', 'gauge', () => revoked().entries)
  metrics.collect('chat_auth_revocation_filter_bytes', 'Bytes of the revoked-jti filters held (two while a fresh one loads)', 'gauge', () => revoked().bytes)
  metrics.collect('chat_auth_revocation_filter_false_positive_ratio', 'Estimated share of unrevoked jtis the filter cannot clear alone', 'gauge', () => revoked().falsePositiveRate)
  metrics.collect('chat_auth_revocation_store_reads_total', 'Revoked-jti questions the filter could not answer alone (store reads)', 'counter', () => revoked().storeReads)
  metrics.collect('chat_auth_revocation_loads_total', 'Loads of the live revocations into a fresh filter, by result', 'counter', () => [
    { labels: { result: 'done' }, value: revoked().loads },
    { labels: { result: 'failed' }, value: revoked().failedLoads },
  ], ['result'])
  metrics.collect('chat_auth_cache_trusted', '1 while the invalidation channel vouches for the caches', 'gauge', () => (bus.health().trusted ? 1 : 0))
}
