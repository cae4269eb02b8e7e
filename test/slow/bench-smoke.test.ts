import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { missing } from '../setup/tools.js'

/**
 * Every scenario of the bench kit end to end at a tiny size (`npm run bench -- --smoke`): each
 * must run and report numbers, or say why it was not run (`--list` marks those too dear to
 * smoke, e.g. under valgrind; a scenario may find a program missing). No thresholds: timings
 * on a shared machine prove nothing here. It runs once, in the PostgreSQL pass, on the kit's
 * default store (pg): the kit is the same code whichever store its node uses, and the gateway
 * on PGlite is what the PGlite pass tests.
 */
const root = fileURLToPath(new URL('../../', import.meta.url))
const script = join(root, 'dist/bench/run.js')

// two runs of 1–3 min each on a quiet machine, several times that on a busy one: tap's timeout bounds them, none of our own is worth asserting
t.setTimeout(1_200_000)

interface Section {
  scenario: string
  title: string
  tables?: Array<{ rows: string[][] }>
  lines?: string[]
  checks?: Array<{ text: string; ok: boolean | undefined }>
  data?: any
}
interface Report {
  ran: string[]
  skipped: Record<string, string>
  failed: Record<string, string>
  sections: Section[]
}

/** The kit as `npm run bench -- ARGS` runs it (tap's process tracker stays out of its processes: test/support/untracked-children.mjs). */
function bench(args: string[], dir: string): { status: number | null; stdout: string; stderr: string; report: Report | undefined } {
  const json = join(dir, `report-${Math.random().toString(36).slice(2)}.json`)
  const run = spawnSync(process.execPath, [script, ...args, '--json', json], { cwd: root, encoding: 'utf8', timeout: 540_000 })
  return { ...run, report: existsSync(json) ? (JSON.parse(readFileSync(json, 'utf8')) as Report) : undefined }
}

/** `--list`: every scenario by name, whether it is in the default set, and whether it can be smoked. */
function listed(): Array<{ name: string; byDefault: boolean }> {
  const out = spawnSync(process.execPath, [script, '--list'], { cwd: root, encoding: 'utf8' }).stdout
  const scenarios = out.split('\ntools:')[0]!
  return [...scenarios.matchAll(/^([* ]) (\S+) {2,}\S/gm)].map((m) => ({ name: m[2]!, byDefault: m[1] === '*' }))
}

/** Each scenario ran (its section is there) or says why not; none failed. */
function everyOneAccountedFor(t: Test, report: Report, names: string[]): void {
  t.same(report.failed, {}, 'no scenario failed')
  for (const name of names) {
    const why = report.skipped[name]
    if (why !== undefined) {
      t.test(name, { skip: why }, async () => {})
      continue
    }
    t.ok(report.ran.includes(name), `${name} ran`)
  }
}

t.test('the bench kit', { skip: existsSync(script) ? false : 'dist/bench/run.js not built' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const scenarios = listed()
  t.ok(scenarios.length >= 20, `--list names every scenario (${scenarios.length})`)

  t.test('the default set (--smoke, two rounds, pg store)', async (t) => {
    // two rounds, so that the per-round table is printed too
    const run = bench(['--smoke', '--rounds', '2', '--store', 'pg'], dir)
    t.equal(run.status, 0, `exits 0\n${run.stderr.slice(-3000)}`)
    const report = run.report!
    everyOneAccountedFor(t, report, scenarios.filter((s) => s.byDefault).map((s) => s.name))
    t.match(run.stdout, /scenario\s+req\/s/, 'prints the table')
    t.match(run.stdout, /each round against the bare round before it\n\n.*round 1\s+round 2\n.*\nbare Fastify\s+[\d,]+ \(\d+ µs, \d+ off-thread\)\s+[\d,]+ \(\d+ µs, \d+ off-thread\)\nverify-hot\s+\d+\.\d\d× \(\d+ µs, \d+ off-thread\)\s+\d+\.\d\d× \(\d+ µs, \d+ off-thread\)\n/, 'and each round against its bare round, with the server\'s CPU per request and its part off the main thread')
    const kit = report.sections.find((s) => s.scenario === 'kit')!.data as {
      results: Record<string, Array<{ rps: number; responses: number; latency: { p99: number }; errors: number; errorKinds: Record<string, number> }>>
      fill?: { rssMb?: number }
      cluster: Array<{ nodes: number; results: Array<{ responses: number }> }>
    }
    // every error of every run is counted once, under its kind (a socket error's code, or "timeout")
    const uncounted = Object.entries(kit.results).flatMap(([key, runs]) =>
      runs.filter((run) => typeof run.errorKinds !== 'object' || Object.values(run.errorKinds).reduce((a, b) => a + b, 0) !== run.errors).map(() => key),
    )
    t.same(uncounted, [], 'each run counts its errors by kind')
    t.match(run.stdout, /mixed's shape on bare Fastify with the plain UPDATE as its 1 %: \d+\.\d\d× of bare Fastify.*; mixed ÷ that shape \d+\.\d\d×/, "and mixed against the same shape on bare Fastify with its writes committed")
    for (const key of ['bare', 'naive', 'verify-hot', 'answer', 'bare@rate', 'verify-hot@rate', 'verify-hot+sessions', 'verify-cold', 'issue-existing', 'issue-new', 'invalidate', 'mixed-shape', 'mixed']) {
      const runs = kit.results[key]
      t.ok(runs && runs.length > 0, `${key} ran`)
      t.ok(runs && runs[0]!.responses > 0 && Number.isFinite(runs[0]!.rps) && Number.isFinite(runs[0]!.latency.p99), `${key} reports numbers`)
    }
    t.ok(Number.isFinite(kit.fill?.rssMb), "fill reports the node's RSS")
    t.same(kit.cluster.map((c) => c.nodes), [1, 2], 'cluster: mixed on 1 and 2 nodes')
    t.ok(kit.cluster.every((c) => c.results.length === 2 && c.results.every((r) => r.responses > 0)), 'each answered in both rounds')
    const memory = report.sections.find((s) => s.scenario === 'memory')?.data as { heapBytesPerUser: number } | undefined
    t.ok(memory && Number.isFinite(memory.heapBytesPerUser), 'memory reports heap per cached user (the kit ran itself again with --expose-gc)')
    for (const name of ['recovery', 'cold-start']) t.ok(report.sections.find((s) => s.scenario === name)?.lines?.length, `${name} reports its windows`)
    // the nginx and Caddy recipes of docs/proxies.md (bench/lib/proxies.ts), where both are installed
    t.test('the proxy scenario', { skip: missing('nginx', 'caddy') }, async (t) => {
      t.match(run.stdout, /behind a reverse proxy/, 'prints its table')
      for (const key of ['proxy:backend', 'proxy:nginx', 'proxy:nginx-auth', 'proxy:caddy', 'proxy:caddy-auth']) {
        const runs = kit.results[key]
        t.ok(runs && runs[0]!.responses > 0 && Number.isFinite(runs[0]!.rps), `${key} ran and reports numbers`)
      }
      const judged = kit.results['proxy:nginx-auth']![0]! as unknown as { wrong: number; statuses: Record<string, number> }
      t.equal(judged.wrong, 0, 'nginx auth_request: no wrong answer')
      t.ok((judged.statuses['401'] ?? 0) > 0, 'its sample of revoked and broken tokens was refused')
    })
  })

  t.test('every other scenario (all --smoke, but the default set)', async (t) => {
    const byDefault = scenarios.filter((s) => s.byDefault).map((s) => s.name)
    const others = scenarios.filter((s) => !s.byDefault).map((s) => s.name)
    const run = bench(['all', '--smoke', '--skip', byDefault.join(',')], dir)
    t.equal(run.status, 0, `exits 0\n${run.stderr.slice(-3000)}`)
    const report = run.report!
    everyOneAccountedFor(t, report, others)
    for (const name of others.filter((name) => report.ran.includes(name) && name !== 'verify-hot-revocations')) {
      const section = report.sections.find((s) => s.scenario === name)
      t.ok(section && (section.tables?.some((table) => table.rows.length > 0) || section.lines?.length), `${name} reports its numbers`)
    }
    if (report.ran.includes('verify-hot-revocations')) {
      // it runs on a deployment of its own, with verify-hot, the only part it needs
      const kit = report.sections.find((s) => s.scenario === 'kit')!.data as { parts: string[]; results: Record<string, Array<{ responses: number }>> }
      t.same(kit.parts, ['verify-hot', 'verify-hot-revocations'], 'verify-hot-revocations runs with verify-hot')
      t.ok(kit.results['verify-hot+revoked']?.[0]!.responses, 'and verify-hot again once the tokens are revoked')
    }
  })
})
