import { LRUCache } from 'lru-cache'
import type { Logger } from 'pino'
import { Redis } from 'ioredis'

/**
 * Failed credentials per name (`a:<client address>`, `k:<keyId>`) in fixed one-minute
 * windows: the first failure opens a window, and a name with `limit` failures in its open
 * window is blocked until the window ends. Only failures are counted: a successful call
 * never adds to a count, so a busy, correct caller is never limited.
 *
 * Why not @fastify/rate-limit: it counts every request in a hook that runs before the
 * outcome is known (its store's `incr` is the only counting call), and has no option to
 * count only failures; bending it means a store whose `incr` does not increment plus our own
 * counting on failure — this module — with the plugin left only to format the 429.
 * test/unit/rate-limit-library.test.ts keeps the proof.
 */
export interface FailureCounts {
  /** ms until the first blocked name's window ends; 0 when none of `names` is blocked */
  blockedFor(names: readonly string[]): Promise<number>
  /** counts one failure against each name; never throws (counting is best-effort) */
  recordFailure(names: readonly string[]): Promise<void>
  close(): Promise<void>
}

export const FAILURE_WINDOW_MS = 60_000

interface Window {
  count: number
  endsAt: number
}

/** One node's counts: the embedded shape, and the fallback while Redis cannot answer. */
export function createMemoryFailureCounts(limit: number, now: () => number = Date.now): FailureCounts {
  // Bounded: a flood of made-up key ids must not grow the heap; an evicted count restarts at 0.
  const windows = new LRUCache<string, Window>({ max: 100_000 })
  const open = (name: string): Window | undefined => {
    const window = windows.get(name)
    if (window !== undefined && window.endsAt <= now()) {
      windows.delete(name)
      return undefined
    }
    return window
  }
  return {
    async blockedFor(names) {
      let wait = 0
      for (const name of names) {
        const window = open(name)
        if (window !== undefined && window.count >= limit) wait = Math.max(wait, window.endsAt - now())
      }
      return wait
    },
    async recordFailure(names) {
      for (const name of names) {
        const window = open(name)
        if (window === undefined) windows.set(name, { count: 1, endsAt: now() + FAILURE_WINDOW_MS })
        else window.count++
      }
    },
    async close() {},
  }
}

export interface RedisFailureCountsOptions {
  url: string
  prefix: string
  limit: number
  logger: Logger
}

/**
 * The counts of every node, kept in Redis: `INCR` on a key that expires with its window.
 * When Redis cannot answer, this node counts on its own (and says so once) rather than
 * refusing every caller or letting every guess through.
 */
export async function createRedisFailureCounts({ url, prefix, limit, logger }: RedisFailureCountsOptions): Promise<FailureCounts> {
  const redis = new Redis(url, {
    // A credential check must not wait for a Redis that is away: fall back at once.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 500,
    lazyConnect: true,
  })
  const local = createMemoryFailureCounts(limit)
  let degraded = false
  redis.on('error', (error: Error) => degrade(error))
  redis.on('ready', () => {
    if (degraded) logger.info('failure counts: Redis is back; counting across nodes again')
    degraded = false
  })
  function degrade(error: unknown): void {
    if (!degraded) logger.warn({ err: error }, 'failure counts: Redis unavailable; counting on this node only')
    degraded = true
  }
  const key = (name: string) => `${prefix}:auth-failures:${name}`
  // Connected before the first request, so that the first failures already count across nodes.
  await redis.connect().catch(degrade)

  return {
    async blockedFor(names) {
      try {
        const counts = await redis.mget(...names.map(key))
        const blocked = names.filter((_, index) => Number(counts[index] ?? 0) >= limit)
        if (blocked.length === 0) return 0
        const ttls = await Promise.all(blocked.map((name) => redis.pttl(key(name))))
        return Math.max(1, ...ttls)
      } catch (error) {
        degrade(error)
        return local.blockedFor(names)
      }
    },
    async recordFailure(names) {
      await local.recordFailure(names)
      try {
        const pipeline = redis.multi()
        // The first failure opens the window; later ones only count in it.
        for (const name of names) pipeline.set(key(name), 0, 'PX', FAILURE_WINDOW_MS, 'NX').incr(key(name))
        await pipeline.exec()
      } catch (error) {
        degrade(error)
      }
    },
    async close() {
      await redis.quit().catch(() => redis.disconnect())
    },
  }
}
