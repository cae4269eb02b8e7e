import { Cluster, type Redis } from 'ioredis'
import type { RedisConnection } from '../../config.js'
import { createRedisClient } from './redis-connection.js'

/**
 * The Redis connection of the failed-credential limits (src/http/failure-limits.ts), made
 * here because every Redis connection of the service is made in bus/. A credential check
 * must not wait for a Redis that is away: no offline queue, no retries, a short timeout.
 * With Sentinel, ioredis leaves a primary as soon as a sentinel announces a failover
 * (`failoverDetector`), so the counts move to the new primary without waiting for the old
 * one to be demoted. On a Cluster the counts spread over the slots (SPEC §11 allows it):
 * ioredis's cluster client, each count one key, one command.
 */
export function createFailureCountsRedis(connection: RedisConnection): Redis | Cluster {
  const behaviour = { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 500, lazyConnect: true }
  if (connection.kind === 'cluster') {
    return new Cluster(
      connection.nodes.map(({ host, port }) => ({ host, port })),
      {
        lazyConnect: true,
        enableOfflineQueue: false,
        redisOptions: { username: connection.username, password: connection.password, ...(connection.tls ? { tls: {} } : {}), ...behaviour },
      },
    )
  }
  return createRedisClient(connection, { ...behaviour, ...(connection.kind === 'sentinel' ? { failoverDetector: true } : {}) })
}
