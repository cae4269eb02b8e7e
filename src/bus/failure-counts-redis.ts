import { Redis } from 'ioredis'

/**
 * The Redis connection of the failed-credential limits (src/http/failure-limits.ts), made
 * here because every Redis connection of the service is made in bus/. A credential check
 * must not wait for a Redis that is away: no offline queue, no retries, a short timeout.
 */
export function createFailureCountsRedis(url: string) {
  return new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 500, lazyConnect: true })
}
