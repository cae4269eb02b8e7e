import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { createFailureCountsRedis } from '../bus/connection/failure-counts-redis.js'
import { failureCountsStore } from './failure-counts-store.js'
import type { RedisConnection } from '../config.js'
import type { MaybePromise } from '../maybe-promise.js'

/**
 * SPEC §7.3: failed credentials counted per client address and per keyId in one-minute
 * windows, through @fastify/rate-limit's own limiter functions. Its hooks would count every
 * request; these are called by hand instead: a peek (`increment: false`) before the
 * credentials are looked at, and a count only when they were wrong, so successful calls
 * never count. Its Redis store shares the counts between nodes; its local store (an LRU)
 * serves one node.
 */
export interface FailureLimits {
  /**
   * ms until the request's address (or the keyId) may try again; 0 when it may now. A number
   * at once while nothing can be blocked (no failure within a window, this node's counts).
   */
  blockedFor(request: FastifyRequest, keyId: string | undefined): MaybePromise<number>
  /** counts one failure against the request's address and the keyId */
  recordFailure(request: FastifyRequest, keyId: string | undefined): Promise<void>
}

export interface FailureLimitsOptions {
  /** failures per window; 0: no limit */
  limit: number
  redis: RedisConnection | undefined
  redisPrefix: string
}

export const FAILURE_WINDOW_MS = 60_000
/** Addresses and key ids held by one node's counts; an evicted one starts again at 0. */
const LOCAL_ENTRIES = 100_000

type Limiter = ReturnType<FastifyInstance['createRateLimit']>

export async function registerFailureLimits(fastify: FastifyInstance, { limit, redis: connection, redisPrefix }: FailureLimitsOptions): Promise<FailureLimits | undefined> {
  if (limit === 0) return undefined
  const redis = connection === undefined ? undefined : createFailureCountsRedis(connection)
  if (redis !== undefined) {
    redis.on('error', (error: Error) => fastify.log.warn({ err: error }, 'failure limits: Redis unavailable; failures are not counted meanwhile'))
    // Connected before the first request, so that the first failures already count across nodes.
    await redis.connect().catch(() => {})
    fastify.addHook('onClose', async () => {
      await redis.quit().catch(() => redis.disconnect())
    })
  }
  await fastify.register(rateLimit, {
    // No hooks on any route: only the limiter functions below count.
    global: false,
    ...(redis !== undefined ? { store: failureCountsStore(redis, `${redisPrefix}:auth-failures:`) } : { cache: LOCAL_ENTRIES }),
    skipOnError: true,
  })
  // The library blocks once a count *exceeds* max; the SPEC blocks *past* `limit` failures.
  const window = { max: limit - 1, timeWindow: FAILURE_WINDOW_MS }
  // The default key generator: the client address, IPv6 grouped by /64 (one host's range).
  const byAddress = fastify.createRateLimit(window)
  // The keyId as the caller presented it (a JSON field, HTTP Basic, a form field): the
  // limiter's key generator sees only the request, so it finds the keyId here.
  const keyIds = new WeakMap<FastifyRequest, string>()
  const byKey = fastify.createRateLimit({ ...window, keyGenerator: (request) => 'keyId:' + keyIds.get(request) })

  const limiters = (request: FastifyRequest, keyId: string | undefined): Limiter[] => {
    if (keyId === undefined) return [byAddress]
    keyIds.set(request, keyId)
    return [byAddress, byKey]
  }
  // With the node's own store, nothing can be blocked a window after its last failure (a
  // count lives one window from its first failure): the peeks, two of the library's async
  // calls, cost 7 % of a token request's instructions (bench/instructions.ts), so a node
  // that saw no failure lately skips them. Redis counts other nodes' failures: always peeked.
  let localCountsLiveUntil = 0
  return {
    blockedFor(request, keyId) {
      if (redis === undefined && Date.now() >= localCountsLiveUntil) return 0
      return Promise.all(limiters(request, keyId).map((check) => check(request, { increment: false }))).then((states) =>
        Math.max(0, ...states.map((state) => (!state.isAllowed && state.isExceeded ? Math.max(1, state.ttl) : 0))),
      )
    },
    async recordFailure(request, keyId) {
      localCountsLiveUntil = Date.now() + FAILURE_WINDOW_MS
      await Promise.all(limiters(request, keyId).map((count) => count(request)))
    },
  }
}

