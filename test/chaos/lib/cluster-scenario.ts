import type { Test } from 'tap'
import { createScratchDatabase } from '../../support/databases.js'
import type { GatewayProcess as NodeProcess } from '../../support/processes.js'
import { startRedisCluster, type ClusterSet } from '../../support/redis-cluster.js'
import { startPostgres, type PostgresServer } from '../../support/services.js'
import { agent } from './http.js'
import { startChaosNode as startNode, type Mutant } from './nodes.js'
import { LEASE_MS, WEBHOOK_RETRY_BASE_MS, type Shape } from './scenario.js'

/**
 * The cluster shape (SPEC §11): a Redis Cluster of three masters with a replica each
 * (test/support/redis-cluster.ts, its own servers on free ports), PostgreSQL of its own, and
 * three nodes on REDIS_CLUSTER_NODES naming every node of the cluster. The bus lives in the
 * slot of `{REDIS_PREFIX}` (`slot`), on one master at a time: the faults and probes move it.
 */
export interface ClusterScenario extends Shape {
  cluster: ClusterSet
  /** the bus's hash slot */
  slot: number
}

/** REDIS_PREFIX of the cluster shape's nodes: the bus's slot is that of `{chat-auth}`. */
const PREFIX = 'chat-auth'

export interface ClusterServices {
  postgres: PostgresServer
  createDatabase(prefix: string): Promise<string>
}

/** The file's PostgreSQL, started before its tests and stopped after (with the driver's keep-alive agent). */
export function clusterServices(t: Test): ClusterServices {
  const services = {} as ClusterServices
  t.before(async () => {
    const postgres = await startPostgres()
    Object.assign(services, { postgres, createDatabase: async (prefix: string) => (await createScratchDatabase(postgres.url, prefix)).name })
  })
  t.teardown(async () => {
    agent.destroy()
    await services.postgres?.stop()
  })
  return services
}

/** A cluster of its own and three nodes on it (node-0 first, for its migrations, then the other two). */
export async function setUpCluster(services: ClusterServices, database: string, mutant: Mutant | undefined): Promise<ClusterScenario> {
  const cluster = await startRedisCluster()
  const databaseUrl = services.postgres.url.replace(/\/[^/]*$/, '/' + database)
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_CLUSTER_NODES: cluster.nodesEnv,
    REDIS_PREFIX: PREFIX,
    CACHE_LEASE_MS: String(LEASE_MS),
    WEBHOOK_RETRY_BASE_MS,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8',
  }
  const nodes: NodeProcess[] = []
  try {
    const slot = await cluster.slotOf(`{${PREFIX}}`)
    nodes.push(await startNode('node-0', env, { mutant }))
    nodes.push(...(await Promise.all([startNode('node-1', env, { mutant }), startNode('node-2', env, { mutant })])))
    return { cluster, slot, nodes, databaseUrl }
  } catch (error) {
    await Promise.allSettled(nodes.map((n) => n.stop()))
    await cluster.stop()
    throw error
  }
}

export async function tearDownCluster(s: ClusterScenario): Promise<void> {
  await Promise.allSettled(s.nodes.map((n) => n.stop()))
  await s.cluster.stop()
}
