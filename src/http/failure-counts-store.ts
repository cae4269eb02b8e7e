import { createRequire } from 'node:module'
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor, RateLimitOptions } from '@fastify/rate-limit'

type RedisStoreConstructor = new (continueExceeding: boolean, exponentialBackoff: boolean, redis: unknown, key: string) => FastifyRateLimitStore

// The library's own Redis store (its INCR/PEXPIRE scripts), which its index does not export.
const LibraryRedisStore = createRequire(import.meta.url)('@fastify/rate-limit/store/RedisStore.js') as RedisStoreConstructor

/**
 * @fastify/rate-limit's Redis store, with every count at `<nameSpace><key>`: for the failure
 * limits, `<REDIS_PREFIX>:auth-failures:<address>` and `…:auth-failures:keyId:<keyId>`.
 *
 * Why: the library names a limiter's keys after its route (`<nameSpace><method><url>-<key>`,
 * its `child` store); the limiters of `createRateLimit` have no route, so their keys read
 * `…:auth-failures:undefinedundefined-<address>`. The limiters' own keys already say what
 * they count, so they share one namespace.
 */
export function failureCountsStore(redis: unknown, nameSpace: string): FastifyRateLimitStoreCtor {
  return class FailureCountsStore extends LibraryRedisStore {
    constructor(options: RateLimitOptions) {
      super(options.continueExceeding ?? false, options.exponentialBackoff ?? false, redis, nameSpace)
    }

    override child(): FastifyRateLimitStore {
      return this
    }
  }
}
