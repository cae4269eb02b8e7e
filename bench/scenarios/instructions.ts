/**
 * instructions: CPU instructions per request, counted by valgrind's callgrind: a count that
 * does not move with the machine's load, unlike req/s on shared cores. Bare Fastify
 * (bench/baselines/server.ts bare) and a node (bench/node-host.ts, on a scratch PostgreSQL
 * database) each run under callgrind with instrumentation off; after a warm-up the kit
 * switches it on, sends a warm-up chunk (translation and JIT settle), zeroes the counts,
 * sends `--requests` verify-hot requests and dumps the count. V8 runs with --single-threaded
 * (its compiler and GC on the main thread) and a young generation of a fixed 16 MB, so that
 * the count does not depend on scheduling or on how fast the machine let the load run. The ratio bare/node is the
 * throughput ratio the CPU alone allows (the kernel's share of the socket work, the same
 * for both, is not counted).
 *
 * `--kind` picks the requests (verify-hot by default; mixed and mixed-no-invalidations keep
 * one model of every user's version over every load, so that its own check counts wrong answers).
 *
 * `--cache-sim` also counts, per request, the data reads and writes that miss callgrind's
 * simulated last-level cache (`--cache-sim=yes`): what a larger working set costs when the
 * host's cache is shared with busy neighbours, which the instruction count does not show.
 *
 * `--keep-dumps DIR` keeps the dumps (and, with `--functions`, the names of V8's code as
 * `<target>.perf.map`) for callgrind_annotate.
 *
 * `--functions N` names where they go: the N functions with the most instructions of their
 * own per request, JavaScript included (V8 writes its code's names with `--perf-basic-prof`:
 * lib/callgrind-functions.ts), and with both targets what the node spends beyond bare
 * Fastify in each. Background work is not taken out of these, and V8 writing the names of
 * code it compiles during the load (`vfprintf`) is counted in them and in the totals.
 *
 * Needs valgrind (callgrind_control, callgrind_annotate) and PostgreSQL at --pg-url.
 */
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { spawnProcess, waitUntilServing, type ChildHandle } from '../../test/support/processes.js'
import { choice, common, flag, number, string } from '../lib/args.js'
import { latestDump, type DumpTotals } from '../lib/callgrind-dumps.js'
import { instructionsByFunction } from '../lib/callgrind-functions.js'
import type { Dataset } from '../lib/data.js'
import { runLoad, type Workload } from '../lib/load.js'
import { DIST, freePort } from '../lib/procs.js'
import { defineScenario } from '../lib/scenario.js'
import { scratchDataset } from '../lib/scratch.js'
import * as S from '../lib/workloads.js'

/**
 * Each kind of request and the one status all its answers must have; `mixed` (95/4/1 of the
 * kit, one model over every load, so that its own check counts wrong answers) answers 200 or 401.
 */
const KINDS = {
  'verify-hot': { workload: S.verifyHot, status: '200' },
  'verify-revoked': { workload: S.verifyRevoked, status: '401' },
  'issue-existing': { workload: S.issueExisting, status: '200' },
  invalidate: { workload: S.invalidate, status: '200' },
  mixed: { workload: (ds: Dataset) => S.mixed(ds), status: undefined },
  'mixed-no-invalidations': { workload: (ds: Dataset) => S.mixed(ds, { invalidateShare: 0 }), status: undefined },
} satisfies Record<string, { workload: (ds: Dataset) => Workload; status: string | undefined }>
type Kind = keyof typeof KINDS

/** What one count is asked to do. */
interface Job {
  kind: Kind
  dumps: string
  keepDumps: boolean
  cacheSim: boolean
  functions: number
  connections: number
  warmUp: number
  requests: number
}

interface Counted {
  target: string
  requests: number
  instructions: number
  /** with --cache-sim: data reads and writes that missed the simulated last-level cache, per request (idle not taken out) */
  lastLevelMissesPerRequest?: number
  /** instructions per second while idle, taken out of perRequest */
  idlePerSecond: number
  perRequest: number
  /** with --functions: each function's own instructions per request, background included */
  byFunction?: Map<string, number>
}

async function underCallgrind(job: Job, target: string, script: string, scriptArgs: string[], env: Record<string, string>, readyPath: string, workload: () => Workload): Promise<Counted> {
  const { dumps, cacheSim, functions, connections } = job
  const port = await freePort()
  const out = join(dumps, `${target}.%p`)
  const proc: ChildHandle = spawnProcess(
    'valgrind',
    // --single-threaded: V8 compiles and collects on this thread, so that the count does not
    // depend on how valgrind schedules its helpers. A fixed young generation: V8 sizes it by
    // the allocation rate per second, and scavenges were a third of a node's count, so a
    // slower run (a busier machine) counted up to 1.7× more per request.
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      ...(cacheSim ? ['--cache-sim=yes'] : []),
      `--callgrind-out-file=${out}`,
      process.execPath,
      '--single-threaded',
      '--min-semi-space-size=16',
      '--max-semi-space-size=16',
      // V8's memory reducer starts a full collection ~8 s after the allocation rate drops: in
      // the idle count's 10 s, which then took up to 19 M instructions a second out of the load
      '--no-memory-reducer',
      ...(functions > 0 ? ['--perf-basic-prof'] : []),
      script,
      ...scriptArgs,
    ],
    { name: target, inheritEnv: true, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, ipc: true },
  )
  const url = `http://127.0.0.1:${port}`
  try {
    await waitUntilServing(proc, url + readyPath, 180_000)
    // vgdb names its pipes after $HOST, which the server's environment sets: the same here
    const control = (...flags: string[]) => execFileSync('callgrind_control', [...flags, String(proc.pid)], { stdio: 'ignore', env: { ...process.env, HOST: '127.0.0.1' } })
    const load = (amount: number) => runLoad(workload(), { label: target, urls: [url], connections, durationS: 3600, amount, progress: null })
    // uninstrumented: caches filled, the JIT's code in place (10,000 requests left TurboFan compiling
    // through the count, 8,000 of a verification's instructions; 40,000 left it at bare Fastify's level)
    await load(job.warmUp)
    control('-i', 'on')
    await load(3000)
    control('-z')
    const result = await load(job.requests)
    const loadDumps = dumpCount(dumps, target)
    control('-d')
    const expected = target === 'bare' ? '200' : KINDS[job.kind].status
    if (expected === undefined ? result.wrong > 0 || result.errors > 0 : result.statuses[expected] !== result.responses) {
      throw new Error(`${target}: ${expected === undefined ? `${result.wrong} wrong answers` : `not every answer was ${expected}`}: ${JSON.stringify(result.statuses)}`)
    }
    const { instructions, lastLevelMisses, file } = await nextDump(dumps, target, url + readyPath, loadDumps)
    const byFunction = functions > 0 ? perRequestOf(instructionsByFunction(file, perfMapOf(proc.pid)), result.responses) : undefined
    // What the process runs by the clock whatever it serves (a node's heartbeats, prom-client's
    // event-loop monitor): counted while idle, per second, and taken out of the load's count,
    // which otherwise grows with how slowly the shared machine let the load run.
    control('-z')
    const idleStarted = performance.now()
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS))
    const dumped = dumpCount(dumps, target)
    control('-d')
    const idle = await nextDump(dumps, target, url + readyPath, dumped)
    const idlePerSecond = idle.instructions / ((performance.now() - idleStarted) / 1000)
    const background = idlePerSecond * result.elapsedS
    const lastLevelMissesPerRequest = lastLevelMisses === undefined ? undefined : lastLevelMisses / result.responses
    return { target, requests: result.responses, instructions, lastLevelMissesPerRequest, idlePerSecond, perRequest: (instructions - background) / result.responses, byFunction }
  } finally {
    await proc.stop(10_000)
    // kept beside the dumps it names: callgrind_annotate's callers of a builtin are JS addresses
    if (functions > 0 && job.keepDumps) copyFileSync(perfMapOf(proc.pid), join(dumps, `${target}.perf.map`))
    if (functions > 0) rmSync(perfMapOf(proc.pid), { force: true })
  }
}

/** Where V8 writes the names of the code it makes under --perf-basic-prof (valgrind runs node in its own process). */
const perfMapOf = (pid: number) => `/tmp/perf-${pid}.map`

const perRequestOf = (counts: Map<string, number>, requests: number) => new Map([...counts].map(([name, count]) => [name, count / requests]))

const IDLE_MS = 10_000

/** The next dump's total: an idle process takes callgrind's commands only when it runs again, so it is poked until the dump is there. */
async function nextDump(dumps: string, target: string, pokeUrl: string, seen: number): Promise<DumpTotals> {
  for (let waited = 0; waited <= 60_000; waited += 200) {
    await fetch(pokeUrl).then((r) => r.arrayBuffer(), () => {})
    await new Promise((resolve) => setTimeout(resolve, 200))
    if (dumpCount(dumps, target) > seen) {
      const total = latestDump(dumps, target)
      if (total !== undefined) return total
    }
  }
  throw new Error(`${target}: no callgrind dump in ${dumps}`)
}

function dumpCount(dir: string, target: string): number {
  return readdirSync(dir).filter((f) => new RegExp(`^${target}\\.\\d+\\.\\d+$`).test(f)).length
}

/** The top functions by their own instructions per request; with both targets, by what the node spends beyond bare. */
function functionLines(counted: Counted[], functions: number): string[] {
  const out: string[] = []
  const [first, second] = counted
  const fmt = (n: number | undefined) => Math.round(n ?? 0).toLocaleString('en-US').padStart(9)
  if (second === undefined) {
    out.push(`${first!.target}: own instructions per request by function (background included)`)
    for (const [name, count] of [...first!.byFunction!].sort((a, b) => b[1] - a[1]).slice(0, functions)) out.push(`${fmt(count)}  ${name}`)
    return out
  }
  const names = new Set([...first!.byFunction!.keys(), ...second.byFunction!.keys()])
  const rows = [...names].map((name) => ({ name, bare: first!.byFunction!.get(name) ?? 0, node: second.byFunction!.get(name) ?? 0 }))
  out.push('own instructions per request by function (background included), by what the node spends beyond bare Fastify', `${'node−bare'.padStart(9)} ${'bare'.padStart(9)} ${'node'.padStart(9)}  function`)
  for (const row of rows.sort((a, b) => b.node - b.bare - (a.node - a.bare)).slice(0, functions)) out.push(`${fmt(row.node - row.bare)} ${fmt(row.bare)} ${fmt(row.node)}  ${row.name}`)
  return out
}

export default defineScenario({
  name: 'instructions',
  description: 'CPU instructions per request under callgrind, bare Fastify and a node: steady on a shared machine (~5 min); needs valgrind',
  options: {
    kind: choice('the requests counted', Object.keys(KINDS) as Kind[], 'verify-hot'),
    requests: number('requests counted per target', { default: 10_000 }),
    warmUpRequests: number('requests sent uninstrumented before counting (default: 40 × --hot, at least 40,000)'),
    hot: common.hot(1000),
    connections: { ...common.connections(4), smoke: undefined },
    only: choice('count one target only', ['both', 'bare', 'node'], 'both'),
    cacheSim: flag("also count, per request, the data reads and writes that miss callgrind's simulated last-level cache"),
    functions: number('name the N functions (JavaScript included) with the most instructions of their own per request, and what the node spends beyond bare Fastify in each', { default: 0 }),
    keepDumps: string('keep the dumps (and, with --functions, the names of V8\'s code) in DIR for callgrind_annotate'),
    pgUrl: common.pgUrl(),
  },
  smoke: 'needs valgrind: a node under callgrind takes minutes to warm up and count (~5 min), no cheap smoke',
  async run(ctx) {
    const { kind, hot, only, functions } = ctx.opts
    if (!Number.isInteger(functions) || functions < 0) throw new Error('--functions: a number of functions to list')
    const dumps = ctx.opts.keepDumps ?? mkdtempSync(join(tmpdir(), 'bench-callgrind-'))
    if (ctx.opts.keepDumps === undefined) ctx.defer(() => rmSync(dumps, { recursive: true, force: true }))
    const job: Job = {
      kind,
      dumps,
      keepDumps: ctx.opts.keepDumps !== undefined,
      cacheSim: ctx.opts.cacheSim,
      functions,
      connections: ctx.opts.connections,
      warmUp: ctx.opts.warmUpRequests ?? Math.max(hot * 40, 40_000),
      requests: ctx.opts.requests,
    }
    const { ds, nodeEnv, drop } = await scratchDataset(ctx.opts.pgUrl, hot)
    ctx.defer(drop)
    const results: Counted[] = []
    // mixed keeps one model of every user's version across the loads; bare Fastify gets verify-hot's requests (its answers are not judged)
    const shared = kind.startsWith('mixed') ? KINDS[kind].workload(ds) : undefined
    const workload = () => shared ?? KINDS[kind].workload(ds)
    const bareWorkload = () => (shared ? S.verifyHot(ds) : workload())
    if (only !== 'node') results.push(await underCallgrind(job, 'bare', DIST + 'bench/baselines/server.js', ['bare'], {}, '/healthz', bareWorkload))
    if (only !== 'bare') results.push(await underCallgrind(job, 'node', DIST + 'bench/node-host.js', [], nodeEnv, '/readyz', workload))
    const rows = results.map((r) => [
      r.target,
      Math.round(r.perRequest).toLocaleString('en-US'),
      r.requests.toLocaleString('en-US'),
      Math.round(r.idlePerSecond).toLocaleString('en-US'),
      Math.round(r.instructions / r.requests).toLocaleString('en-US'),
      r.lastLevelMissesPerRequest === undefined ? '-' : r.lastLevelMissesPerRequest.toFixed(1),
    ])
    const bare = results.find((r) => r.target === 'bare')
    const node = results.find((r) => r.target === 'node')
    return {
      scenario: 'instructions',
      title: `instructions: ${kind}, CPU instructions per request under callgrind`,
      tables: [{ headers: ['target', 'per request', 'requests', 'idle per s (taken out)', 'per request with idle', 'last-level data misses per request'], rows }],
      lines: [
        ...(bare && node ? [`bare / node: ${(bare.perRequest / node.perRequest).toFixed(2)}× (${kind}'s CPU-bound ceiling as a ratio to bare Fastify)`] : []),
        ...(functions > 0 ? functionLines(results, functions) : []),
      ],
      data: results.map((r) => ({ ...r, byFunction: r.byFunction ? Object.fromEntries(r.byFunction) : undefined })),
    }
  },
})
