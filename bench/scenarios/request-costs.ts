/**
 * request-costs: what one request of each kind costs in CPU: the node's, the load generator's and
 * PostgreSQL's, per request, for each of the requests `mixed` is made of, measured in turns
 * against one node (and bare Fastify and a plain UPDATE beside it) so that every kind meets
 * the same moments of a shared machine. CPU per request moves less with a noisy host than
 * req/s does; the medians over rounds say what a kind adds to `mixed`.
 *
 * `--rate R` offers every kind but `bare` R requests a second instead of as many as are
 * answered: what a request costs when it comes at that rate, e.g. `--kinds
 * bare,invalidate,update --rate 340`, `mixed`'s writes at its rate alone. Each process's CPU
 * while idle (timers, PostgreSQL's background work), measured before the rounds, is taken
 * out of every kind's; at a low rate it would otherwise count per request.
 *
 * PostgreSQL's share is the CPU of every `postgres` process of this machine: run it with
 * nothing else using the server. The node runs without Redis, as `npm run bench`'s does.
 * Two kinds take `mixed` apart: its shape on the baseline server of plain UPDATEs (what any
 * server committing the same 1 % costs), and `mixed` without its invalidations (95/5/0:
 * what the writes add to the rest).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import { common, number, string } from '../lib/args.js'
import { runLoad, type Workload } from '../lib/load.js'
import { cpuSeconds, DIST, freePort, mainThreadCpuSeconds, startProcess, type Proc } from '../lib/procs.js'
import { median } from '../lib/report.js'
import { defineScenario } from '../lib/scenario.js'
import { scratchDataset } from '../lib/scratch.js'
import * as S from '../lib/workloads.js'

const KINDS = {
  bare: 'bare Fastify, the verify-hot requests',
  answer: "bare Fastify sending verify-hot's answer (its headers and body)",
  'verify-hot': 'verify, round-robin over the hot set',
  'verify-revoked': 'verify, every token revoked (401)',
  'verify-one-in-ten-revoked': "verify, mixed's users: 9 current tokens, then 1 revoked",
  'issue-existing': 'token for a known user, round-robin over the hot set',
  invalidate: 'invalidate-token, round-robin over 2,000 users',
  update: 'a plain single-row UPDATE (the baseline server)',
  'mixed-shape': "mixed's 95/4/1 on the baseline server (bare's constant, the plain UPDATE)",
  'mixed-no-invalidations': 'mixed without its invalidations (95/5/0)',
  mixed: 'the mixed scenario (95/4/1)',
} as const
type Kind = keyof typeof KINDS
/** the kinds sent to the baseline server of plain UPDATEs; every other kind but `bare` and `answer` (servers of their own) goes to the node */
const ON_UPDATE_SERVER: ReadonlySet<Kind> = new Set(['update', 'mixed-shape'])

/** CPU seconds of every PostgreSQL process of this machine so far (backends come and go with the pools). */
function postgresCpuSeconds(): number {
  let seconds = 0
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8') !== 'postgres\n') continue
    } catch {
      continue // gone between the listing and the read
    }
    seconds += cpuSeconds(Number(pid)) ?? 0
  }
  return seconds
}

export default defineScenario({
  name: 'request-costs',
  description: "the node's, the generator's and PostgreSQL's CPU per request of each kind mixed is made of, in turns on one node, idle CPU taken out",
  options: {
    rounds: common.rounds(5),
    duration: common.duration(3, 0.5),
    warmup: common.warmup(1, 0.2),
    kinds: string(`comma-separated, of: ${Object.keys(KINDS).join(', ')}`, { default: Object.keys(KINDS).join(',') }),
    hot: common.hot(10_000, 200),
    rate: number("requests a second offered to every kind but bare (default: as many as are answered), e.g. 340: a write's cost at mixed's rate"),
    idle: number("seconds each process's idle CPU is measured, before the rounds", { default: 3, smoke: 0.5 }),
    host: common.host(),
    pgUrl: common.pgUrl(),
  },
  smoke: true,
  async run(ctx) {
    const { rounds, duration: durationS, rate } = ctx.opts
    if (rate !== undefined && !(rate > 0)) throw new Error('--rate: requests a second, more than 0')
    const kinds = ctx.opts.kinds.split(',') as Kind[]
    for (const kind of kinds) if (!(kind in KINDS)) throw new Error(`unknown kind ${kind}: one of ${Object.keys(KINDS).join(', ')}`)
    const scratch = await scratchDataset(ctx.opts.pgUrl, ctx.opts.hot)
    ctx.defer(() => scratch.drop())
    const { ds, nodeEnv } = scratch
    const procs: Proc[] = []
    const start = async (name: string, script: string, scriptArgs: string[], env: Record<string, string>, readyPath?: string) => {
      const proc = await startProcess({ name, script, args: scriptArgs, nodeFlags: name === 'node' ? ['--expose-gc'] : [], ipc: name === 'node', env, port: await freePort(), readyPath })
      procs.push(proc)
      ctx.watch(proc)
      ctx.defer(() => proc.stop())
      return proc
    }
    const node = await start('node', ctx.opts.host ?? DIST + 'bench/node-host.js', [], nodeEnv, '/readyz')
    const bare = await start('bare', DIST + 'bench/baselines/server.js', ['bare'], {})
    const answer = kinds.includes('answer') ? await start('answer', DIST + 'bench/baselines/server.js', ['answer'], { VERIFY_ANSWER: await S.verifyAnswer(node.url, ds) }) : undefined
    const update = kinds.some((kind) => ON_UPDATE_SERVER.has(kind)) ? await start('update', DIST + 'bench/baselines/server.js', ['update'], { DATABASE_URL: nodeEnv.DATABASE_URL! }) : undefined

    // The node knows every user and their external ids, as after the kit's fill and priming.
    const quiet = { connections: 50, progress: null }
    await runLoad(S.verifyAllOnce(ds), { ...quiet, label: 'fill', urls: [node.url], durationS: 3600, amount: ds.layout.users })
    await runLoad(S.issueMixedOnce(ds), { ...quiet, label: 'prime', urls: [node.url], durationS: 3600, amount: ds.layout.mixed })
    await runLoad(S.issueExisting(ds), { ...quiet, label: 'prime', urls: [node.url], durationS: 3600, amount: ds.layout.hot })

    const workloads: Record<Kind, () => Workload> = {
      bare: () => S.verifyHot(ds),
      answer: () => S.verifyHot(ds),
      'verify-hot': () => S.verifyHot(ds),
      'verify-revoked': () => S.verifyRevoked(ds),
      'verify-one-in-ten-revoked': () => S.verifyOneInTenRevoked(ds),
      'issue-existing': () => S.issueExisting(ds),
      invalidate: () => S.invalidate(ds),
      update: () => S.invalidate(ds),
      'mixed-shape': () => S.mixedShape(ds),
      'mixed-no-invalidations': () => S.mixed(ds, { invalidateShare: 0 }),
      mixed: () => S.mixed(ds),
    }
    const target = (kind: Kind) => (kind === 'bare' ? bare : kind === 'answer' ? answer! : ON_UPDATE_SERVER.has(kind) ? update! : node)

    // CPU seconds per second of each process with no load, taken out of every measurement below
    const idleS = ctx.opts.idle
    const idleBefore = procs.map((proc) => cpuSeconds(proc.pid)!)
    const idleMainBefore = procs.map((proc) => mainThreadCpuSeconds(proc.pid)!)
    const postgresIdleBefore = postgresCpuSeconds()
    await sleep(idleS * 1000)
    const idle = new Map(procs.map((proc, i) => [proc, (cpuSeconds(proc.pid)! - idleBefore[i]!) / idleS]))
    const idleMain = new Map(procs.map((proc, i) => [proc, (mainThreadCpuSeconds(proc.pid)! - idleMainBefore[i]!) / idleS]))
    const postgresIdle = (postgresCpuSeconds() - postgresIdleBefore) / idleS

    const samples = new Map<Kind, Array<{ rps: number; node: number; nodeMain: number; generator: number; postgres: number }>>()
    for (let round = 1; round <= rounds; round++) {
      ctx.log(`round ${round}/${rounds}`)
      for (const kind of kinds) {
        const proc = target(kind)
        const workload = workloads[kind]()
        await runLoad(workload, { ...quiet, label: kind, urls: [proc.url], durationS: ctx.opts.warmup })
        workload.reset?.()
        const generatorBefore = process.cpuUsage()
        const serverBefore = cpuSeconds(proc.pid)!
        const serverMainBefore = mainThreadCpuSeconds(proc.pid)!
        const postgresBefore = postgresCpuSeconds()
        const result = await runLoad(workload, { ...quiet, label: kind, urls: [proc.url], durationS, ...(rate !== undefined && kind !== 'bare' ? { rate } : {}) })
        const generator = process.cpuUsage(generatorBefore)
        const perRequest = (seconds: number) => (1e6 * seconds) / result.responses
        const sample = {
          rps: result.rps,
          node: perRequest(cpuSeconds(proc.pid)! - serverBefore - idle.get(proc)! * result.elapsedS),
          nodeMain: perRequest(mainThreadCpuSeconds(proc.pid)! - serverMainBefore - idleMain.get(proc)! * result.elapsedS),
          generator: perRequest((generator.user + generator.system) / 1e6),
          postgres: perRequest(postgresCpuSeconds() - postgresBefore - postgresIdle * result.elapsedS),
        }
        // the next round's model starts from this one's versions and tokens
        if (kind === 'mixed') S.saveMixed(ds, workload as ReturnType<typeof S.mixed>)
        const rows = samples.get(kind) ?? []
        rows.push(sample)
        samples.set(kind, rows)
      }
    }

    const bareRps = samples.get('bare')?.map((s) => s.rps)
    const offered = rate === undefined ? '' : `; every kind but bare offered ${rate} req/s`
    const idleMs = (share: number) => (1000 * share).toFixed(1)
    const rows = kinds.map((kind) => {
      const rs = samples.get(kind)!
      const ratios = bareRps ? rs.map((s, i) => (s.rps / bareRps[i]!).toFixed(2)).join(' ') : '-'
      const µs = (pick: (s: (typeof rs)[number]) => number) => median(rs.map(pick)).toFixed(1)
      return [kind, KINDS[kind], Math.round(median(rs.map((s) => s.rps))).toLocaleString('en-US'), ratios, µs((s) => s.node), µs((s) => s.nodeMain), µs((s) => s.generator), µs((s) => s.postgres)]
    })
    return {
      scenario: 'request-costs',
      title: `request-costs: CPU per request, medians of ${rounds} rounds of ${durationS} s (50 connections${offered}); × bare: each round's req/s over the bare round before it`,
      about: [`idle CPU taken out, ms per s: ${procs.map((proc) => `${proc.name} ${idleMs(idle.get(proc)!)}`).join(', ')}, PostgreSQL ${idleMs(postgresIdle)}`],
      tables: [{ headers: ['kind', 'what', 'req/s', '× bare (rounds)', 'node µs', 'of it, main thread', 'generator µs', 'PostgreSQL µs'], rows }],
      data: Object.fromEntries(samples),
    }
  },
})
