import type { Test } from 'tap'
import { createScratchDatabase } from '../../support/databases.js'
import type { GatewayProcess as NodeProcess } from '../../support/processes.js'
import { startPostgres, startRedis, type PostgresServer, type RedisServer, type SentinelSet } from '../../support/services.js'
import { startTcpProxy, type TcpProxy } from '../../support/tcp-proxy.js'
import { agent } from './http.js'
import { startChaosNode as startNode, type Mutant } from './nodes.js'

/**
 * The shapes the chaos runs drive. The plain one: its own redis-server and PostgreSQL
 * (initdb into a temporary folder), three node processes each reaching Redis through a TCP
 * proxy the test controls, node-1's wall clock 1.5 s behind PostgreSQL's and node-2's 1.5 s
 * ahead (libfaketime), within MAX_CLOCK_SKEW (2 s). The Sentinel one: a primary, a replica
 * and three sentinels, three nodes on REDIS_SENTINELS.
 */
export const LEASE_MS = 500
/** The nodes' clocks against PostgreSQL's (node-0 on the machine's), all within MAX_CLOCK_SKEW. */
export const CLOCKS: Clocks = { maxSkew: '2s', offsets: [undefined, '-1.5s', '+1.5s'] }

/** MAX_CLOCK_SKEW, and each node's wall clock against the machine's (libfaketime's offset; undefined: the machine's). */
export interface Clocks {
  maxSkew: string
  offsets: ReadonlyArray<string | undefined>
}
export const WEBHOOK_RETRY_BASE_MS = '200'
/** The webhook receivers listen on loopback: webhooks go only to public addresses unless allowed (SPEC §9.3). */
const WEBHOOK_ALLOW_PRIVATE_NETWORKS = '127.0.0.0/8'

/** What every shape has: the nodes the driver and the probes talk to, and their database. */
export interface Shape {
  nodes: NodeProcess[]
  databaseUrl: string
}

export interface Scenario extends Shape {
  redis: RedisServer
  postgres: PostgresServer
  proxies: TcpProxy[]
}

export interface SentinelScenario extends Shape {
  set: SentinelSet
}

/** The Redis and PostgreSQL servers of one test file, and a scratch database of them per run. */
export interface Services {
  redis: RedisServer
  postgres: PostgresServer
  createDatabase(prefix: string): Promise<string>
}

/** Starts the file's servers before its tests and stops them after (with the driver's keep-alive agent). */
export function chaosServices(t: Test): Services {
  const services = {} as Services
  t.before(async () => {
    const [redis, postgres] = await Promise.all([startRedis(), startPostgres()])
    Object.assign(services, { redis, postgres, createDatabase: async (prefix: string) => (await createScratchDatabase(postgres.url, prefix)).name })
  })
  t.teardown(async () => {
    agent.destroy()
    await services.redis?.stop()
    await services.postgres?.stop()
  })
  return services
}

const urlOf = (postgres: PostgresServer, database: string) => postgres.url.replace(/\/[^/]*$/, '/' + database)

/** Three nodes started one after the other's migrations: node-0 first, then the other two side by side. */
async function startThree(start: (i: number) => Promise<NodeProcess>): Promise<NodeProcess[]> {
  const nodes: NodeProcess[] = []
  try {
    nodes.push(await start(0))
    nodes.push(...(await Promise.all([start(1), start(2)])))
  } catch (error) {
    await Promise.allSettled(nodes.map((n) => n.stop()))
    throw error
  }
  return nodes
}

/** `leaseMs` and `clocks`: CACHE_LEASE_MS of every node and their clocks (LEASE_MS and CLOCKS unless a mutant's run needs wider ones). */
export async function setUp(services: Services, database: string, mutant: Mutant | undefined, options: { leaseMs?: number; clocks?: Clocks } = {}): Promise<Scenario> {
  const clocks = options.clocks ?? CLOCKS
  const { redis, postgres } = services
  const proxies = await Promise.all([0, 1, 2].map(() => startTcpProxy(redis.port)))
  const databaseUrl = urlOf(postgres, database)
  const env = (i: number) => ({
    DATABASE_URL: databaseUrl,
    REDIS_URL: `redis://127.0.0.1:${proxies[i]!.port}`,
    CACHE_LEASE_MS: String(options.leaseMs ?? LEASE_MS),
    MAX_CLOCK_SKEW: clocks.maxSkew,
    WEBHOOK_RETRY_BASE_MS,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS,
  })
  // The mutant runs start their nodes through a test-only entry point: no configuration
  // variable can take a defence out.
  try {
    const nodes = await startThree((i) => startNode(`node-${i}`, env(i), { mutant, clockOffset: clocks.offsets[i] }))
    return { redis, postgres, proxies, nodes, databaseUrl }
  } catch (error) {
    await Promise.allSettled(proxies.map((p) => p.close()))
    throw error
  }
}

export async function tearDown(s: Scenario): Promise<void> {
  await Promise.allSettled(s.nodes.map((n) => n.stop()))
  await Promise.allSettled(s.proxies.map((p) => p.close()))
}

export async function setUpSentinel(set: SentinelSet, postgres: PostgresServer, database: string, mutant: 'no-primary-check' | undefined): Promise<SentinelScenario> {
  const databaseUrl = urlOf(postgres, database)
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_SENTINELS: set.sentinelsEnv,
    REDIS_SENTINEL_NAME: set.name,
    CACHE_LEASE_MS: String(LEASE_MS),
    WEBHOOK_RETRY_BASE_MS,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS,
  }
  const nodes = await startThree((i) => startNode(`node-${i}`, env, { mutant }))
  return { set, nodes, databaseUrl }
}
