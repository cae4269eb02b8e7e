/**
 * redis-shapes: what each shape of Redis costs a write, side by side in one run. Three
 * deployments of three `chat-auth serve` nodes each — on one Redis server, on Redis Sentinel
 * (a primary, a replica, three sentinels) and on a Redis Cluster (three masters with a replica
 * each) — every one of them started from the local redis-server, with a scratch database of
 * its own. Each round runs `--invalidations` invalidate-token calls one at a time, in turn
 * on each node, on every shape in turn (every other round in reverse order, so that no shape
 * always runs first on a shared machine), and reports the latency of the call as its client
 * sees it: p50 and p99 per shape, and each shape's p50 as a ratio to the one server's,
 * measured in the same round.
 */
import { performance } from 'node:perf_hooks'
import { createScratchDatabase } from '../../test/support/databases.js'
import { startRedisCluster } from '../../test/support/redis-cluster.js'
import { startRedis, startSentinelSet } from '../../test/support/services.js'
import { common, number } from '../lib/args.js'
import { DIST, freePort, startProcess, type Proc } from '../lib/procs.js'
import { defineScenario } from '../lib/scenario.js'

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'
const JWT_SECRET = 'bench-jwt-secret-that-is-at-least-32-bytes-long!!'
const SHAPES = ['one server', 'Sentinel', 'Cluster'] as const
type Shape = (typeof SHAPES)[number]

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!
}

async function json(base: string, method: string, path: string, body?: unknown, admin = false): Promise<any> {
  const response = await fetch(base + path, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(admin ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text.startsWith('{') ? JSON.parse(text) : text
}

/** Three nodes on one shape's Redis, a company and a user: what an invalidation needs. */
interface Deployment {
  nodes: Proc[]
  invalidate(i: number): Promise<void>
}

async function deploy(redisEnv: Record<string, string>, pgUrl: string, ctx: { defer(f: () => unknown): void; watch(p: Proc): void }, label: string): Promise<Deployment> {
  const database = await createScratchDatabase(pgUrl, 'bench_shapes')
  ctx.defer(() => database.drop())
  const env = { DATABASE_URL: database.url, ...redisEnv, ADMIN_TOKEN, JWT_SECRET, LOG_LEVEL: 'warn', SEED_DEMO: 'false', CACHE_LEASE_MS: '500' }
  const nodes: Proc[] = []
  const start = async (i: number) => {
    const node = await startProcess({ name: `${label}-${i}`, script: DIST + 'src/cli.js', args: ['serve'], env, port: await freePort(), readyPath: '/readyz' })
    ctx.watch(node)
    ctx.defer(() => node.stop())
    return node
  }
  nodes.push(await start(0))
  nodes.push(...(await Promise.all([start(1), start(2)])))
  const a = nodes[0]!.url
  const company = await json(a, 'POST', '/admin/v1/companies', { name: 'Bench' }, true)
  await json(a, 'POST', `/admin/v1/companies/${company.id}/agents`, { name: 'Agent' }, true)
  const key = await json(a, 'POST', `/admin/v1/companies/${company.id}/api-keys`, { name: 'bench' }, true)
  const issued = await json(a, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: 'bench-user' })
  return {
    nodes,
    invalidate: (i) => json(nodes[i % nodes.length]!.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.user.id }),
  }
}

export default defineScenario({
  name: 'redis-shapes',
  description: 'invalidate latency (p50, p99) with three nodes on one Redis server, on Sentinel and on a Cluster, side by side in one run',
  options: {
    rounds: common.rounds(3),
    invalidations: number('invalidations per round and shape, one at a time, in turn on each node', { default: 200, smoke: 5 }),
    pgUrl: common.pgUrl(),
  },
  smoke: true,
  async run(ctx) {
    const redis = await startRedis()
    ctx.defer(() => redis.stop())
    const sentinels = await startSentinelSet()
    ctx.defer(() => sentinels.stop())
    const cluster = await startRedisCluster()
    ctx.defer(() => cluster.stop())
    const deployments: Record<Shape, Deployment> = {
      'one server': await deploy({ REDIS_URL: redis.url }, ctx.opts.pgUrl, ctx, 'server'),
      Sentinel: await deploy({ REDIS_SENTINELS: sentinels.sentinelsEnv, REDIS_SENTINEL_NAME: sentinels.name }, ctx.opts.pgUrl, ctx, 'sentinel'),
      Cluster: await deploy({ REDIS_CLUSTER_NODES: cluster.nodesEnv }, ctx.opts.pgUrl, ctx, 'cluster'),
    }
    const perRound: Array<Record<Shape, { p50: number; p99: number }>> = []
    const rows: string[][] = []
    const f = (ms: number) => ms.toFixed(2)
    for (let round = 1; round <= ctx.opts.rounds; round++) {
      const measured = {} as Record<Shape, { p50: number; p99: number }>
      for (const shape of round % 2 ? SHAPES : [...SHAPES].reverse()) {
        const latencies: number[] = []
        for (let i = 0; i < ctx.opts.invalidations; i++) {
          const started = performance.now()
          await deployments[shape].invalidate(i)
          latencies.push(performance.now() - started)
        }
        measured[shape] = { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99) }
        ctx.log(`round ${round}  ${shape}: invalidate p50 ${f(measured[shape].p50)} ms, p99 ${f(measured[shape].p99)} ms`)
      }
      perRound.push(measured)
      for (const shape of SHAPES) rows.push([`round ${round}`, shape, f(measured[shape].p50), f(measured[shape].p99), (measured[shape].p50 / measured['one server'].p50).toFixed(2)])
    }
    const median = (values: number[]) => quantile(values, 0.5)
    for (const shape of SHAPES) {
      const p50 = median(perRound.map((r) => r[shape].p50))
      const p99 = median(perRound.map((r) => r[shape].p99))
      const ratio = median(perRound.map((r) => r[shape].p50 / r['one server'].p50))
      rows.push(['median over rounds', shape, f(p50), f(p99), ratio.toFixed(2)])
    }
    return {
      scenario: 'redis-shapes',
      title: `redis-shapes: invalidate-token over HTTP with three nodes, ${ctx.opts.invalidations} a round and shape, one at a time; ratio: p50 to one server's in the same round`,
      tables: [{ headers: ['', 'shape', 'p50 ms', 'p99 ms', 'p50 ÷ one server'], rows }],
      data: perRound,
    }
  },
})
