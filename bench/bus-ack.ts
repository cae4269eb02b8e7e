/**
 * The bus's acknowledgement latency with three nodes, for one or more builds side by side
 * in the same run (interleaved, in alternating order, so that both see the same machine):
 *
 *   npm run build && node dist/bench/bus-ack.js                         # this build
 *   node dist/bench/bus-ack.js --cli /path/to/other/dist/src/cli.js ... # and another one
 *
 * Each round and build: its own redis-server on a free port, a scratch PostgreSQL database,
 * three `chat-auth serve` nodes on them, a company and one user, then `--invalidations`
 * invalidate-token calls in turn on each node, one at a time. Reported: each node's
 * `chat_auth_bus_ack_latency_seconds` (publish → every other node acknowledged; the median
 * of the three nodes) and the client-side latency of the invalidate call.
 */
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { DIST, freePort, startProcess, type Proc } from './lib/procs.js'
import { createScratchDatabase } from '../test/support/databases.js'
import { startRedis } from '../test/support/services.js'

const { values } = parseArgs({
  options: {
    cli: { type: 'string', multiple: true },
    rounds: { type: 'string', default: '3' },
    invalidations: { type: 'string', default: '300' },
    'pg-url': { type: 'string', default: 'postgres://root@127.0.0.1:5432/postgres' },
  },
})
const clis = values.cli?.length ? values.cli : [DIST + 'src/cli.js']
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'
const JWT_SECRET = 'bench-jwt-secret-that-is-at-least-32-bytes-long!!'

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!
}
const median = (values: number[]) => quantile(values, 0.5)

/**
 * A quantile of one node's ack latency, in ms: from the histogram, interpolated within its
 * bucket as PromQL's histogram_quantile does; from the quantile gauge of builds older than
 * the histogram, read as is (so that old and new builds compare side by side).
 */
function ackQuantileMs(text: string, q: number): number {
  const gauge = text.match(new RegExp(`chat_auth_bus_ack_latency_seconds\\{quantile="${q}"\\} (\\S+)`))
  if (gauge) return Number(gauge[1]) * 1000
  const buckets = [...text.matchAll(/chat_auth_bus_ack_latency_seconds_bucket\{le="([^"]+)"\} (\d+)/g)].map((m) => ({
    le: m[1] === '+Inf' ? Infinity : Number(m[1]),
    count: Number(m[2]),
  }))
  const total = buckets.at(-1)?.count ?? 0
  const rank = q * total
  let lower = 0
  let below = 0
  for (const { le, count } of buckets) {
    if (total > 0 && count >= rank) return (le === Infinity ? lower : lower + ((le - lower) * (rank - below)) / Math.max(1, count - below)) * 1000
    lower = le
    below = count
  }
  return Number.NaN
}

async function json(base: string, method: string, path: string, body?: unknown, admin = false): Promise<any> {
  const response = await fetch(base + path, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(admin ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await response.text()
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return text.startsWith('{') || text.startsWith('[') ? JSON.parse(text) : text
}

async function measure(cli: string, invalidations: number): Promise<{ ackMean: number; ackP50: number; ackP99: number; httpP50: number; httpP99: number }> {
  const redis = await startRedis()
  const database = await createScratchDatabase(values['pg-url']!, 'bench_bus')
  const nodes: Proc[] = []
  try {
    const env = { DATABASE_URL: database.url, REDIS_URL: redis.url, ADMIN_TOKEN, JWT_SECRET, LOG_LEVEL: 'warn', SEED_DEMO: 'false', CACHE_LEASE_MS: '500' }
    const start = async (i: number) => startProcess({ name: `node-${i}`, script: cli, args: ['serve'], env, port: await freePort(), readyPath: '/readyz' })
    nodes.push(await start(0))
    nodes.push(...(await Promise.all([start(1), start(2)])))
    const [a] = nodes.map((n) => n.url) as [string]
    const company = await json(a, 'POST', '/admin/v1/companies', { name: 'Bench' }, true)
    await json(a, 'POST', `/admin/v1/companies/${company.id}/agents`, { name: 'Agent' }, true)
    const key = await json(a, 'POST', `/admin/v1/companies/${company.id}/api-keys`, { name: 'bench' }, true)
    const issued = await json(a, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: 'bench-user' })
    const http: number[] = []
    for (let i = 0; i < invalidations; i++) {
      const started = performance.now()
      await json(nodes[i % 3]!.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.user.id })
      http.push(performance.now() - started)
    }
    // The ack latency is a histogram: add the three nodes' buckets; its mean is exact.
    const texts: string[] = await Promise.all(nodes.map((n) => json(n.url, 'GET', '/metrics')))
    const buckets = new Map<number, number>()
    let sum = 0
    let count = 0
    for (const text of texts) {
      for (const m of text.matchAll(/chat_auth_bus_ack_latency_seconds_bucket\{le="([^"]+)"\} (\d+)/g)) buckets.set(Number(m[1]), (buckets.get(Number(m[1])) ?? 0) + Number(m[2]))
      sum += Number(/^chat_auth_bus_ack_latency_seconds_sum (\S+)$/m.exec(text)?.[1] ?? NaN)
      count += Number(/^chat_auth_bus_ack_latency_seconds_count (\S+)$/m.exec(text)?.[1] ?? NaN)
    }
    const sorted = [...buckets].sort((x, y) => x[0] - y[0])
    const bound = (q: number) => (sorted.find(([, c]) => c >= q * count)?.[0] ?? NaN) * 1000
    return { ackMean: (sum / count) * 1000, ackP50: bound(0.5), ackP99: bound(0.99), httpP50: quantile(http, 0.5), httpP99: quantile(http, 0.99) }
  } finally {
    await Promise.allSettled(nodes.map((n) => n.stop()))
    await redis.stop()
    await database.drop()
  }
}

const results = new Map<string, Array<Awaited<ReturnType<typeof measure>>>>(clis.map((cli) => [cli, []]))
for (let round = 1; round <= Number(values.rounds); round++) {
  // every other round in reverse order, so that no build always runs first
  for (const cli of round % 2 ? clis : [...clis].reverse()) {
    const result = await measure(cli, Number(values.invalidations))
    results.get(cli)!.push(result)
    const f = (ms: number) => ms.toFixed(2).padStart(7)
    console.log(`round ${round}  ack mean ${f(result.ackMean)} ms, p50 ≤ ${f(result.ackP50)} ms, p99 ≤ ${f(result.ackP99)} ms  | invalidate over HTTP p50 ${f(result.httpP50)} ms  p99 ${f(result.httpP99)} ms  ${cli}`)
  }
}
console.log('\nmedian over rounds (three nodes, ack = publish → every other node acknowledged):')
for (const [cli, list] of results) {
  const m = (pick: (r: (typeof list)[number]) => number) => median(list.map(pick)).toFixed(2)
  console.log(`  ack mean ${m((r) => r.ackMean)} ms, p50 ≤ ${m((r) => r.ackP50)} ms, p99 ≤ ${m((r) => r.ackP99)} ms; invalidate p50 ${m((r) => r.httpP50)} ms, p99 ${m((r) => r.httpP99)} ms  ${cli}`)
}
