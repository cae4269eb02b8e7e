import type { CoherentCache, Revisioned } from './coherent-cache.js'

/**
 * The misses of one cache, read together: every key asked for within one tick is read in
 * one query (`= ANY($1)`), once however many requests asked for it, and each value found is
 * offered to the cache under the ticket taken just before that query (coherent-cache.ts:
 * kept only if no change for its key and no flush happened while it read).
 *
 * A key asked for after its query went out waits for the next one instead of sharing the
 * read in flight: a read must start after the request that uses it did, or it could predate
 * a change that had already answered when the request arrived.
 */
export interface MissBatcher<V> {
  load(key: string): Promise<V | undefined>
}

interface Waiter<V> {
  resolve(value: V | undefined): void
  reject(error: unknown): void
}

/** keys per query: a bounded statement, and a bounded loop over its rows */
const MAX_KEYS_PER_READ = 1000

export function createMissBatcher<V extends Revisioned>(
  cache: CoherentCache<V>,
  /** the values of the keys that exist, by key */
  readMany: (keys: string[]) => Promise<Map<string, V>>,
): MissBatcher<V> {
  let pending = new Map<string, Array<Waiter<V>>>()
  let scheduled = false

  function flush(): void {
    scheduled = false
    const batch = pending
    pending = new Map()
    const keys = [...batch.keys()]
    for (let start = 0; start < keys.length; start += MAX_KEYS_PER_READ) {
      const slice = keys.slice(start, start + MAX_KEYS_PER_READ)
      const ticket = cache.ticket()
      readMany(slice).then(
        (found) => {
          for (const key of slice) {
            const value = found.get(key)
            if (value !== undefined) cache.fill(key, value, ticket)
            for (const waiter of batch.get(key)!) waiter.resolve(value)
          }
        },
        (error: unknown) => {
          for (const key of slice) for (const waiter of batch.get(key)!) waiter.reject(error)
        },
      )
    }
  }

  return {
    load(key) {
      return new Promise<V | undefined>((resolve, reject) => {
        const waiters = pending.get(key)
        if (waiters) waiters.push({ resolve, reject })
        else pending.set(key, [{ resolve, reject }])
        if (!scheduled) {
          scheduled = true
          setImmediate(flush)
        }
      })
    },
  }
}
