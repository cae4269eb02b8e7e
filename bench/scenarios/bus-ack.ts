/**
 * bus-ack: the bus's acknowledgement latency with three nodes, for one or more builds side
 * by side in the same run (interleaved, in alternating order, so that both see the same
 * machine): `--cli OTHER/dist/src/cli.js` (repeatable) adds another build.
 *
 * Each round and build: its own redis-server on a free port, a scratch PostgreSQL database,
 * three `chat-auth serve` nodes on them, a company and one user, then `--invalidations`
 * invalidate-token calls in turn on each node, one at a time.
 *
 * The ack latency is measured from outside, the same way for every build, so that builds
 * whose metrics differ (an old per-node quantile gauge, a newer histogram with coarse
 * buckets) still compare: a fourth Redis connection watches every command of the
 * deployment (MONITOR) and timestamps, on Redis's clock, per invalidation, the publish of the
 * change and the last acknowledgement that follows it. That is the time from the change reaching Redis to every
 * node having acknowledged it, which is what a write waits for. Reported with the
 * client-side latency of the invalidate call.
 */
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { createScratchDatabase } from '../../test/support/databases.js'
import { sleep } from '../../test/support/poll.js'
import { startRedis } from '../../test/support/services.js'
import { common, list, number } from '../lib/args.js'
import { DIST, freePort, startProcess, type Proc } from '../lib/procs.js'
import { defineScenario } from '../lib/scenario.js'

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'
const JWT_SECRET = 'bench-jwt-secret-that-is-at-least-32-bytes-long!!'
const PREFIX = 'chat-auth'

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!
}
const median = (values: number[]) => quantile(values, 0.5)

/**
 * Watches the deployment's publishes with MONITOR (a subscriber would be a receiver the
 * writers do not know, and a careful writer waits such a receiver out), on Redis's own
 * clock: each PUBLISH on `<prefix>:changes` (from the writers' Lua script) opens a window,
 * each PUBLISH on an ack channel moves that window's end. Invalidations run one at a time,
 * so every ack between two changes belongs to the first of them.
 */
async function watchAcks(url: string): Promise<{ latencies(): number[]; close(): Promise<void> }> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 })
  await client.connect()
  const monitor = await client.monitor()
  const windows: Array<{ change: number; lastAck: number | undefined }> = []
  monitor.on('monitor', (time: string, args: string[]) => {
    if (args[0]?.toLowerCase() !== 'publish') return
    const ms = Number(time) * 1000
    if (args[1] === `${PREFIX}:changes`) windows.push({ change: ms, lastAck: undefined })
    else if (args[1]?.startsWith(`${PREFIX}:ack:`) && windows.length > 0) windows.at(-1)!.lastAck = ms
  })
  return {
    latencies: () => windows.flatMap((w) => (w.lastAck === undefined ? [] : [w.lastAck - w.change])),
    close: async () => {
      monitor.disconnect()
      client.disconnect()
    },
  }
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

async function measure(cli: string, invalidations: number, pgUrl: string, watch: (proc: Proc) => void): Promise<{ ackMean: number; ackP50: number; ackP99: number; httpP50: number; httpP99: number }> {
  const redis = await startRedis()
  const database = await createScratchDatabase(pgUrl, 'bench_bus')
  const nodes: Proc[] = []
  let observer: Awaited<ReturnType<typeof watchAcks>> | undefined
  try {
    const env = { DATABASE_URL: database.url, REDIS_URL: redis.url, ADMIN_TOKEN, JWT_SECRET, LOG_LEVEL: 'warn', SEED_DEMO: 'false', CACHE_LEASE_MS: '500' }
    const start = async (i: number) => {
      const node = await startProcess({ name: `node-${i}`, script: cli, args: ['serve'], env, port: await freePort(), readyPath: '/readyz' })
      watch(node)
      return node
    }
    nodes.push(await start(0))
    nodes.push(...(await Promise.all([start(1), start(2)])))
    const [a] = nodes.map((n) => n.url) as [string]
    const company = await json(a, 'POST', '/admin/v1/companies', { name: 'Bench' }, true)
    await json(a, 'POST', `/admin/v1/companies/${company.id}/agents`, { name: 'Agent' }, true)
    const key = await json(a, 'POST', `/admin/v1/companies/${company.id}/api-keys`, { name: 'bench' }, true)
    const issued = await json(a, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: 'bench-user' })
    // watch only the invalidations: issuing the first token also publishes a change
    await sleep(200)
    observer = await watchAcks(redis.url)
    const http: number[] = []
    for (let i = 0; i < invalidations; i++) {
      const started = performance.now()
      await json(nodes[i % 3]!.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.user.id })
      http.push(performance.now() - started)
    }
    const acks = observer.latencies()
    if (acks.length < invalidations) throw new Error(`saw ${acks.length} acknowledged changes for ${invalidations} invalidations`)
    const mean = acks.reduce((a, b) => a + b, 0) / acks.length
    return { ackMean: mean, ackP50: quantile(acks, 0.5), ackP99: quantile(acks, 0.99), httpP50: quantile(http, 0.5), httpP99: quantile(http, 0.99) }
  } finally {
    await observer?.close()
    await Promise.allSettled(nodes.map((n) => n.stop()))
    await redis.stop()
    await database.drop()
  }
}

type Measured = Awaited<ReturnType<typeof measure>>

export default defineScenario({
  name: 'bus-ack',
  description: "the bus's acknowledgement latency with three nodes (change on Redis → last ack, seen from outside); several builds side by side",
  options: {
    cli: list("another build's dist/src/cli.js (repeatable; default: this build alone)"),
    rounds: common.rounds(3),
    invalidations: number('invalidations per round and build, one at a time, in turn on each node', { default: 300, smoke: 10 }),
    pgUrl: common.pgUrl(),
  },
  smoke: true,
  async run(ctx) {
    const clis = ctx.opts.cli.length ? ctx.opts.cli : [DIST + 'src/cli.js']
    const results = new Map<string, Measured[]>(clis.map((cli) => [cli, []]))
    const f = (ms: number) => ms.toFixed(2)
    const rows: string[][] = []
    for (let round = 1; round <= ctx.opts.rounds; round++) {
      // every other round in reverse order, so that no build always runs first
      for (const cli of round % 2 ? clis : [...clis].reverse()) {
        const result = await measure(cli, ctx.opts.invalidations, ctx.opts.pgUrl, ctx.watch)
        results.get(cli)!.push(result)
        rows.push([`round ${round}`, cli, f(result.ackMean), f(result.ackP50), f(result.ackP99), f(result.httpP50), f(result.httpP99)])
        ctx.log(`round ${round}  ack mean ${f(result.ackMean)} ms, p50 ${f(result.ackP50)} ms, p99 ${f(result.ackP99)} ms  | invalidate over HTTP p50 ${f(result.httpP50)} ms  p99 ${f(result.httpP99)} ms  ${cli}`)
      }
    }
    for (const [cli, runs] of results) {
      const m = (pick: (r: Measured) => number) => median(runs.map(pick)).toFixed(2)
      rows.push(['median over rounds', cli, m((r) => r.ackMean), m((r) => r.ackP50), m((r) => r.ackP99), m((r) => r.httpP50), m((r) => r.httpP99)])
    }
    return {
      scenario: 'bus-ack',
      title: `bus-ack: three nodes, ack = change on Redis → last acknowledgement, seen by an observer; ${ctx.opts.invalidations} invalidations per round`,
      tables: [{ headers: ['', 'build', 'ack mean ms', 'ack p50 ms', 'ack p99 ms', 'invalidate p50 ms', 'invalidate p99 ms'], rows }],
      data: Object.fromEntries(results),
    }
  },
})
