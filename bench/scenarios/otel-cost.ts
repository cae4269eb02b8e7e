/**
 * otel-cost: what OpenTelemetry costs verify-hot, in the same run: `chat-auth serve` nodes that differ
 * only in their OTEL_* variables, loaded in turn (interleaved, the order reversed every other
 * round) so that a noisy neighbour hits every variant alike.
 *
 * `--before OTHER/dist/src/cli.js` also runs that build, without OTEL_* variables; `--cpu-prof`
 * profiles each node into ./bench-profiles/otel-cost-<variant>/ (`npm run bench -- profile` reads them).
 *
 * Variants (each its own node on its own scratch database, the in-process bus):
 * - `off`: no OTEL_* variable, as every node without them (nothing of OpenTelemetry loaded);
 * - `before` (with --before): another build, no OTEL_* variable: what `off` must equal;
 * - `on`: OTEL_EXPORTER_OTLP_ENDPOINT to a sink in this process (OTLP/HTTP protobuf, the
 *   SDK's defaults: every request sampled, batches of 512 every 5 s, 2,048 queued at most:
 *   at this rate most spans are dropped at the queue, after they were made);
 * - `on, 1% sampled`: the same with OTEL_TRACES_SAMPLER=parentbased_traceidratio, ARG 0.01,
 *   what a busy deployment would set.
 *
 * Per variant: the median over rounds of req/s and of the node's CPU per request (user +
 * system time of the node process, from /proc, over the responses), and each round's ratio
 * to `off` (median of the ratios). verify-hot: a working set of tokens that fits the caches,
 * so a verification is a cache hit (no PostgreSQL, no Redis): what OpenTelemetry adds is
 * the request's spans alone.
 */
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { once } from 'node:events'
import { createScratchDatabase } from '../../test/support/databases.js'
import { common, flag, string } from '../lib/args.js'
import { BENCH_NEW_USER_LIMITS, layoutFor, prepareApi } from '../lib/data.js'
import { runLoad, type LoadResult } from '../lib/load.js'
import { DIST, freePort, startProcess, type Proc } from '../lib/procs.js'
import { median } from '../lib/report.js'
import { defineScenario } from '../lib/scenario.js'
import { verifyHot } from '../lib/workloads.js'

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'
const JWT_SECRET = 'bench-jwt-secret-that-is-at-least-32-bytes-long!!'

/** An OTLP/HTTP endpoint that takes every batch and keeps only its count and size. */
async function startSink(): Promise<{ url: string; batches: number; bytes: number; close(): void }> {
  const sink = { url: '', batches: 0, bytes: 0, close: () => server.close() }
  const server = createServer((request, response) => {
    request.on('data', (chunk: Buffer) => (sink.bytes += chunk.length))
    request.on('end', () => {
      sink.batches++
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  sink.url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  return sink
}

/** CPU seconds (user + system) the process has used so far. */
function cpuSeconds(pid: number, ticksPerSecond: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / ticksPerSecond
}

interface Running {
  name: string
  node: Proc
  workload: ReturnType<typeof verifyHot>
}

type Row = { rps: number; cpuUsPerRequest: number; p99: number }

export default defineScenario({
  name: 'otel-cost',
  description: 'verify-hot with OpenTelemetry off, on, and on at 1 % sampled (and another build), same run: req/s and CPU per request × off',
  options: {
    rounds: common.rounds(5),
    duration: common.duration(5),
    warmup: { ...common.warmup(2, 0.1), help: 'seconds of one warm-up run per variant, before the rounds (JIT, caches, the exporter\'s first batches)' },
    connections: common.connections(50),
    users: common.users(1000, 50),
    before: string("another build's dist/src/cli.js, run without OTEL_* variables: what `off` must equal"),
    cpuProf: flag('profile each node into ./bench-profiles/otel-cost-<variant>/'),
    pgUrl: common.pgUrl(),
  },
  smoke: true,
  async run(ctx) {
    const { rounds, duration: durationS, connections, users } = ctx.opts
    const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim())
    const sink = await startSink()
    ctx.defer(() => sink.close())
    const variants: Array<{ name: string; cli: string; env: Record<string, string> }> = [
      { name: 'off', cli: DIST + 'src/cli.js', env: {} },
      ...(ctx.opts.before ? [{ name: 'before', cli: ctx.opts.before, env: {} }] : []),
      { name: 'on', cli: DIST + 'src/cli.js', env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: 'chat-auth-bench' } },
      {
        name: 'on, 1% sampled',
        cli: DIST + 'src/cli.js',
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_SERVICE_NAME: 'chat-auth-bench', OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' },
      },
    ]
    const running: Running[] = []
    const results = new Map<string, Row[]>(variants.map((v) => [v.name, []]))
    for (const variant of variants) {
      const database = await createScratchDatabase(ctx.opts.pgUrl, 'bench_otel')
      ctx.defer(() => database.drop())
      const env = { DATABASE_URL: database.url, ADMIN_TOKEN, JWT_SECRET, LOG_LEVEL: 'warn', SEED_DEMO: 'false', ...BENCH_NEW_USER_LIMITS, ...variant.env }
      // A folder per variant: with OpenTelemetry on, the module loader's thread writes a profile of its own.
      const nodeFlags = ctx.opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=bench-profiles/otel-cost-${variant.name.replace(/\W+/g, '-')}`] : []
      const node = await startProcess({ name: variant.name, script: variant.cli, args: ['serve'], nodeFlags, env, port: await freePort(), readyPath: '/readyz' })
      ctx.watch(node)
      ctx.defer(() => node.stop())
      const dataset = await prepareApi({ url: node.url, adminToken: ADMIN_TOKEN }, layoutFor(users, users))
      running.push({ name: variant.name, node, workload: verifyHot(dataset) })
      ctx.log(`${variant.name}: ready on ${node.url} (${variant.cli})`)
    }
    // One warm-up run each: JIT, caches, the exporter's first batches.
    for (const r of running) await runLoad(r.workload, { label: `${r.name} warm-up`, urls: [r.node.url], connections, durationS: ctx.opts.warmup, progress: null })

    for (let round = 1; round <= rounds; round++) {
      for (const r of round % 2 ? running : [...running].reverse()) {
        const cpuBefore = cpuSeconds(r.node.pid, ticksPerSecond)
        const result: LoadResult = await runLoad(r.workload, { label: `${r.name} r${round}`, urls: [r.node.url], connections, durationS, progress: process.stderr })
        const cpu = cpuSeconds(r.node.pid, ticksPerSecond) - cpuBefore
        const ok = result.statuses['200'] ?? 0
        if (ok !== result.responses || result.errors > 0) throw new Error(`${r.name}: ${JSON.stringify(result.statuses)}, ${result.errors} errors: every verification must answer 200`)
        const row = { rps: result.rps, cpuUsPerRequest: (cpu * 1e6) / result.responses, p99: result.latency.p99 }
        results.get(r.name)!.push(row)
        ctx.log(`round ${round}  ${r.name.padEnd(16)} ${Math.round(row.rps).toLocaleString('en-US').padStart(7)} req/s  ${row.cpuUsPerRequest.toFixed(1).padStart(6)} µs CPU/request  p99 ${row.p99.toFixed(2)} ms`)
      }
    }

    const off = results.get('off')!
    const rows = [...results].map(([name, list]) => {
      const ratio = (pick: (row: Row) => number) => median(list.map((row, i) => pick(row) / pick(off[i]!))).toFixed(2)
      return [name, Math.round(median(list.map((r) => r.rps))).toLocaleString('en-US'), ratio((r) => r.rps), median(list.map((r) => r.cpuUsPerRequest)).toFixed(1), ratio((r) => r.cpuUsPerRequest), median(list.map((r) => r.p99)).toFixed(2)]
    })
    return {
      scenario: 'otel-cost',
      title: `otel-cost: verify-hot, ${connections} connections, ${durationS} s per run, median of ${rounds} rounds (ratios: each round's, to off in the same round, then their median)`,
      tables: [{ headers: ['variant', 'req/s', '× off', 'µs CPU/req', '× off', 'p99 ms'], rows }],
      lines: [`(the sink took ${sink.batches.toLocaleString('en-US')} batches, ${(sink.bytes / 1e6).toFixed(1)} MB)`],
      data: Object.fromEntries(results),
    }
  },
})
