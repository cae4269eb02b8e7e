import { spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { missing } from './setup/tools.js'

/**
 * A few seconds of the bench kit end to end (`bench --smoke`): it must run and report
 * numbers. No thresholds: timings on a shared machine prove nothing here. It runs once, in
 * the PostgreSQL pass, on the kit's default store (pg): the kit is the same code whichever
 * store its node uses, and the gateway on PGlite is what the PGlite pass tests.
 */
const root = fileURLToPath(new URL('../', import.meta.url))
const script = join(root, 'dist/bench/run.js')

t.setTimeout(300_000)

t.test('bench --smoke (pg store)', { skip: existsSync(script) ? false : 'dist/bench/run.js not built' }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'bench-smoke-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const json = join(dir, 'result.json')
  // no time limit of its own worth asserting: a shared machine may be slow; tap's timeout bounds it
  // (tap's process tracker stays out of the kit's processes: test/support/untracked-children.mjs)
  // two rounds, so that the per-round table is printed too
  const run = spawnSync(process.execPath, [script, '--smoke', '--rounds', '2', '--store', 'pg', '--json', json], {
    cwd: root,
    encoding: 'utf8',
    timeout: 280_000,
  })
  t.equal(run.status, 0, `exits 0\n${run.stderr.slice(-3000)}`)
  t.match(run.stdout, /scenario\s+req\/s/, 'prints the table')
  t.match(run.stdout, /each round against the bare round before it\n\n.*round 1\s+round 2\n.*\nbare Fastify\s+[\d,]+ \(\d+ µs, \d+ off-thread\)\s+[\d,]+ \(\d+ µs, \d+ off-thread\)\nverify-hot\s+\d+\.\d\d× \(\d+ µs, \d+ off-thread\)\s+\d+\.\d\d× \(\d+ µs, \d+ off-thread\)\n/, 'and each round against its bare round, with the server\'s CPU per request and its part off the main thread')
  const report = JSON.parse(readFileSync(json, 'utf8')) as {
    results: Record<string, Array<{ rps: number; responses: number; latency: { p99: number }; errors: number; errorKinds: Record<string, number> }>>
    memory?: { heapBytesPerUser: number }
  }
  // every error of every run is counted once, under its kind (a socket error's code, or "timeout")
  const uncounted = Object.entries(report.results).flatMap(([key, runs]) =>
    runs.filter((run) => typeof run.errorKinds !== 'object' || Object.values(run.errorKinds).reduce((a, b) => a + b, 0) !== run.errors).map(() => key),
  )
  t.same(uncounted, [], 'each run counts its errors by kind')
  t.match(run.stdout, /mixed's shape on bare Fastify with the plain UPDATE as its 1 %: \d+\.\d\d× of bare Fastify.*; mixed ÷ that shape \d+\.\d\d×/, "and mixed against the same shape on bare Fastify with its writes committed")
  for (const key of ['bare', 'verify-hot', 'verify-cold', 'issue-existing', 'issue-new', 'invalidate', 'mixed-shape', 'mixed']) {
    const runs = report.results[key]
    t.ok(runs && runs.length > 0, `${key} ran`)
    t.ok(runs && runs[0]!.responses > 0 && Number.isFinite(runs[0]!.rps) && Number.isFinite(runs[0]!.latency.p99), `${key} reports numbers`)
  }
  t.ok(report.memory && Number.isFinite(report.memory.heapBytesPerUser), 'reports heap per cached user')
  // the nginx and Caddy recipes of docs/proxies.md (bench/lib/proxies.ts), where both are installed
  const proxies = missing('nginx', 'caddy')
  t.test('the proxy scenario', { skip: proxies }, async (t) => {
    t.match(run.stdout, /behind a reverse proxy/, 'prints its table')
    for (const key of ['proxy:backend', 'proxy:nginx', 'proxy:nginx-auth', 'proxy:caddy', 'proxy:caddy-auth']) {
      const runs = report.results[key]
      t.ok(runs && runs[0]!.responses > 0 && Number.isFinite(runs[0]!.rps), `${key} ran and reports numbers`)
    }
    const judged = report.results['proxy:nginx-auth']![0]! as unknown as { wrong: number; statuses: Record<string, number> }
    t.equal(judged.wrong, 0, 'nginx auth_request: no wrong answer')
    t.ok((judged.statuses['401'] ?? 0) > 0, 'its sample of revoked and broken tokens was refused')
  })
})
