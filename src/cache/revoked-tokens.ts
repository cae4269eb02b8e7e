import { LRUCache } from 'lru-cache'
import type { RevokedToken } from '../domain.js'
import { createRevocationFilter, type RevocationFilter } from './revocation-filter.js'
import type { MaybePromise } from '../maybe-promise.js'

/**
 * The node's knowledge of the tokens revoked one by one (SPEC §7.1), in memory of a fixed
 * size whatever a tenant revokes: a Bloom filter of every live revocation (revocation-filter.ts)
 * in front of the store. A jti the filter has never seen is answered without I/O; a "maybe"
 * (a revoked token, or a rare false positive) is a primary-key read, and a jti the store
 * confirmed is remembered (a revocation never ends before the token does, so that memory
 * needs no coherence).
 *
 * The filter answers alone only while it is *complete*: a load of every live revocation from
 * the store, started after the last epoch change (a flush: the moment from which the bus
 * delivers every change again), has finished. Until then, and while the bus does not vouch
 * for the node, every question is a store read. Messages — live, or replayed by the catch-up
 * (the change log holds each revocation as the row `token`) — are added whenever they come.
 *
 * One load at a time, in pages of bounded size, each its own short query: a load never
 * holds a table-sized result, never outlives the query timeout, and a question never starts
 * one. A failed load is tried again on a timer. Revocations expire but bits cannot be taken
 * out: once as many were added as the last load found, a fresh filter is loaded beside the
 * one that answers (both receive the messages meanwhile) and replaces it.
 */
export interface RevokedTokens {
  /** Without I/O while complete and trusted and the filter says no; a store read otherwise. */
  isRevoked(jti: string): MaybePromise<boolean>
  add(token: RevokedToken): void
  /** Changes may have been missed: answer from the store until a new load is in. */
  reload(): void
  /** the filter answers (see above) */
  readonly complete: boolean
  /** a first load has finished: until then the node is not ready (/readyz) */
  readonly loaded: boolean
  stats(): RevokedTokensStats
  close(): void
}

export interface RevokedTokensStats {
  /** jtis in the filter that answers */
  entries: number
  /** bytes of the filters held: the one that answers and, while a load runs, the next */
  bytes: number
  falsePositiveRate: number
  /** questions the filter could not answer alone */
  storeReads: number
  loads: number
  failedLoads: number
}

export interface RevokedTokensOptions {
  /** Up to `limit` jtis of the revocations the store keeps, each greater than `after`, in ascending order. */
  loadPage: (after: string, limit: number) => Promise<string[]>
  /** the store's answer for one jti */
  read: (jti: string) => Promise<boolean>
  trusted: () => boolean
  /** REVOCATION_FILTER_BYTES: the filter's size (twice this while a rebuild loads) */
  filterBytes: number
  pageSize?: number
  /** a rebuild waits for at least this many additions, however few the last load found */
  rebuildAfterAdds?: number
  /** first wait before a failed load is tried again; doubled up to 30 s */
  retryAfterMs?: number
  /** tests and the chaos test's mutants (test/chaos) wrap or replace the filters */
  createFilter?: (bytes: number) => RevocationFilter
  onLoad?: (load: { entries: number; ms: number; rebuild: boolean }) => void
  onLoadError?: (error: unknown) => void
}

/** jtis the store confirmed as revoked, kept so that a revoked token presented again costs no read */
const CONFIRMED = 16_384
const MAX_RETRY_MS = 30_000

export function createRevokedTokens(options: RevokedTokensOptions): RevokedTokens {
  const { filterBytes, pageSize = 20_000, rebuildAfterAdds = 100_000, retryAfterMs = 1000 } = options
  const newFilter = options.createFilter ?? createRevocationFilter
  const confirmed = new LRUCache<string, true>({ max: CONFIRMED })
  let current = newFilter(filterBytes)
  let next: RevocationFilter | undefined
  let complete = false
  let loaded = false
  let loading = false
  let closed = false
  let generation = 0
  let foundByLastLoad = 0
  let addsSinceLoad = 0
  let retryDelay = retryAfterMs
  let retryTimer: NodeJS.Timeout | undefined
  const stats = { storeReads: 0, loads: 0, failedLoads: 0 }

  function startLoad(): void {
    if (loading || closed) return
    clearTimeout(retryTimer)
    loading = true
    void load()
  }

  async function load(): Promise<void> {
    const rebuild = complete
    for (;;) {
      const started = generation
      const began = performance.now()
      const filter = newFilter(filterBytes)
      next = filter
      try {
        for (let after = ''; ; ) {
          const page = await options.loadPage(after, pageSize)
          if (closed || generation !== started) break
          filter.addAll(page)
          if (page.length < pageSize) break
          after = page[page.length - 1]!
        }
      } catch (error) {
        next = undefined
        loading = false
        stats.failedLoads++
        options.onLoadError?.(error)
        if (!closed) {
          retryTimer = setTimeout(startLoad, retryDelay).unref()
          retryDelay = Math.min(retryDelay * 2, MAX_RETRY_MS)
        }
        return
      }
      if (closed) return
      // A load that began before the last epoch change may lack what was missed since.
      if (generation !== started) continue
      current = filter
      next = undefined
      complete = true
      loaded = true
      loading = false
      foundByLastLoad = filter.entries
      addsSinceLoad = 0
      retryDelay = retryAfterMs
      stats.loads++
      options.onLoad?.({ entries: filter.entries, ms: Math.round(performance.now() - began), rebuild })
      return
    }
  }

  function add({ jti }: RevokedToken): void {
    current.add(jti)
    next?.add(jti)
    if (++addsSinceLoad > Math.max(foundByLastLoad, rebuildAfterAdds) && complete) startLoad()
  }

  async function readStore(jti: string): Promise<boolean> {
    stats.storeReads++
    const found = await options.read(jti)
    if (found) confirmed.set(jti, true)
    return found
  }

  startLoad()

  return {
    isRevoked(jti) {
      // Known revoked: true can only refuse more, whatever the bus says.
      if (confirmed.has(jti)) return true
      if (complete && options.trusted() && !current.mightHold(jti)) return false
      return readStore(jti)
    },
    add,
    reload() {
      generation++
      complete = false
      startLoad()
    },
    get complete() {
      return complete
    },
    get loaded() {
      return loaded
    },
    stats: () => ({
      entries: current.entries,
      bytes: current.bytes + (next?.bytes ?? 0),
      falsePositiveRate: current.falsePositiveRate(),
      ...stats,
    }),
    close() {
      closed = true
      clearTimeout(retryTimer)
    },
  }
}
