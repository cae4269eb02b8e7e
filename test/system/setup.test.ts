import { execFile, execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import { filesOf } from '../setup/passes.js'
import { Failures } from '../setup/failures.js'
import { NOT_RUN_LOG_VARIABLE, notRunSummary, readNotRun } from '../setup/not-run.js'
import { missing, PRETEND_MISSING_VARIABLE, SUITE_FILE_VARIABLE } from '../setup/tools.js'
import { freePort } from '../support/ports.js'
import { ROOT } from '../support/processes.js'

/**
 * `npm test`'s own setup (test/setup/): the store matrix, and the path of a machine that
 * lacks a program some tests run. TEST_PRETEND_MISSING makes the setup and the tests treat
 * a program as neither installed nor installable; nothing else sets it.
 */
const run = promisify(execFile)

/** A Node script of this package run with tsx and `env` (plus PATH): its exit code and output. */
async function node(script: string, env: Record<string, string>): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import=tsx', script], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } })
    return { code: 0, output: stdout + stderr }
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string }
    return { code: failed.code, output: failed.stdout + failed.stderr }
  }
}

function scratchLog(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'chat-auth-setup-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return join(dir, 'not-run.jsonl')
}

t.test('the folder a test is in says how it runs: both stores, once on PostgreSQL, once on PGlite, or not in npm test', async (t) => {
  const pglite = filesOf('pglite')
  const postgres = filesOf('postgres')
  const everywhere = (folder: string) => (file: string) => file.startsWith(folder + '/')
  t.ok(pglite.some(everywhere('test/stores')) && postgres.some(everywhere('test/stores')), 'test/stores/ runs in both passes')
  t.same(pglite.filter(everywhere('test/stores')), postgres.filter(everywhere('test/stores')), 'the same files in both')
  t.ok(postgres.includes('test/system/deploy/all.test.ts') && !pglite.some(everywhere('test/system')), 'test/system/ runs once, in the PostgreSQL pass')
  t.ok(postgres.includes('test/in-process/verify/all.test.ts') && !pglite.some(everywhere('test/in-process')), 'test/in-process/ runs once, in the PostgreSQL pass')
  t.ok(pglite.includes('test/embedded/lifecycle.test.ts') && !postgres.some(everywhere('test/embedded')), 'test/embedded/ runs once, in the PGlite pass')
  t.ok(postgres.includes('test/system/proxies/proxies.test.ts'), 'a folder below is found too')
  t.notOk([...pglite, ...postgres].some((file) => /\/support\//.test(file)), 'support/ holds no test')
  t.notOk([...pglite, ...postgres].some((file) => /^test\/(chaos|slow)\//.test(file)), 'the chaos run and the slow tests are not in npm test')
  // A folder with an all.test.ts is one process: that file alone is listed.
  t.ok(pglite.includes('test/stores/api/tokens/all.test.ts') && !pglite.includes('test/stores/api/tokens/token.test.ts'), 'test/stores/api/tokens/ as one process')
  t.ok(pglite.includes('test/unit/all.test.ts') && !pglite.some((file) => file.startsWith('test/unit/') && file !== 'test/unit/all.test.ts'), 'test/unit/ as one process')
  t.notOk(postgres.some(everywhere('test/unit')), 'test/unit/ runs once, in the PGlite pass (no store; that pass ends first)')
  const size = (file: string) => (file.endsWith('/all.test.ts') ? execFileSync('sh', ['-c', `cat ${file.slice(0, -'all.test.ts'.length)}*.test.ts | wc -c`], { cwd: ROOT, encoding: 'utf8' }) : execFileSync('wc', ['-c', file], { cwd: ROOT, encoding: 'utf8' })).trim().split(/\s+/)[0]
  const sizes = postgres.map((file) => Number(size(file)))
  t.same(sizes, [...sizes].sort((a, b) => b - a), 'largest first: tap starts them in that order')
  t.same(filesOf('postgres', ['test/system/browser/docs-page.test.ts', 'test/embedded/lifecycle.test.ts']), ['test/system/browser/docs-page.test.ts'], 'named files: those of the pass')
  t.same(filesOf('pglite', ['test/stores/api/tokens/token.test.ts']), ['test/stores/api/tokens/token.test.ts'], 'a file of a folder run as one: alone, in the passes of its folder')
  // Every test file of the repository is in a pass or in a folder run apart.
  const listed = new Set([...pglite, ...postgres])
  const suites = [...listed].filter((file) => file.endsWith('/all.test.ts')).map((file) => file.slice(0, -'all.test.ts'.length))
  const tracked = execFileSync('git', ['ls-files', 'test/*.test.ts', 'test/**/*.test.ts'], { encoding: 'utf8' }).split('\n').filter(Boolean)
  const lost = tracked.filter((file) => !listed.has(file) && !suites.some((suite) => file.startsWith(suite)) && !/^test\/(chaos|slow)\//.test(file))
  t.same(lost, [], 'no test file outside the folders that say how it runs')
})

t.test('a test that needs a missing program skips, says why and is recorded', async (t) => {
  for (const [file, tool, skipped] of [
    ['test/system/browser/docs-page.test.ts', 'chromium', 'Chromium renders /docs'],
    ['test/system/proxies/proxies.test.ts', 'caddy', 'the shipped proxy configs'],
  ] as const) {
    const log = scratchLog(t)
    const { code, output } = await node(file, { TEST_STORE: 'postgres', TEST_PRETEND_MISSING: tool, TEST_NOT_RUN_LOG: log })
    t.equal(code, 0, `${file}: a skip is no failure`)
    t.match(output, new RegExp(`ok 1 - ${skipped}.* # SKIP not installed: ${tool} \\(Debian package ${tool}\\)`), `${file}: skips with the reason`)
    t.same(readNotRun(log), [{ file, tools: [tool], reason: `not installed: ${tool} (Debian package ${tool})` }], `${file}: recorded for the summary`)
  }
})

t.test('in a folder run as one process, a skip is recorded under the file whose test skipped, not the folder', async (t) => {
  const log = scratchLog(t)
  const file = 'test/system/browser/docs-page.test.ts'
  const saved = { log: process.env[NOT_RUN_LOG_VARIABLE], pretend: process.env[PRETEND_MISSING_VARIABLE], file: process.env[SUITE_FILE_VARIABLE] }
  t.teardown(() => {
    for (const [name, value] of [[NOT_RUN_LOG_VARIABLE, saved.log], [PRETEND_MISSING_VARIABLE, saved.pretend], [SUITE_FILE_VARIABLE, saved.file]] as const) {
      if (value === undefined) delete process.env[name]
      else process.env[name] = value
    }
  })
  // what test/support/suite.ts sets while it loads a file of test/system/browser/
  Object.assign(process.env, { [NOT_RUN_LOG_VARIABLE]: log, [PRETEND_MISSING_VARIABLE]: 'chromium', [SUITE_FILE_VARIABLE]: file })
  const reason = 'not installed: chromium (Debian package chromium)'
  t.equal(missing('chromium'), reason, 'the skip says why')
  t.same(readNotRun(log), [{ file, tools: ['chromium'], reason }], 'recorded under the file that skipped')
})

t.test('the setup starts a local Redis that does not answer, and installs nothing it is told it cannot, saying so', async (t) => {
  const port = await freePort()
  const { code, output } = await node('test/setup/prepare.ts', { TEST_REDIS_URL: `redis://127.0.0.1:${port}`, TEST_PRETEND_MISSING: 'nginx,caddy,chromium,faketime,iptables' })
  const redis = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  redis.on('error', () => {})
  t.teardown(() => redis.call('SHUTDOWN', 'NOSAVE').catch(() => {}))
  t.equal(code, 0, 'a program it cannot install does not stop the run: its tests skip')
  t.match(output, 'setup: starting Redis')
  await redis.connect()
  t.equal(await redis.ping(), 'PONG', 'Redis answers')
  for (const tool of ['nginx', 'caddy', 'chromium', 'faketime', 'iptables']) t.match(output, `setup: ${tool} is not installed, and its tests will skip: TEST_PRETEND_MISSING pretends it cannot be installed`)
  t.notMatch(output, 'installing', 'no apt-get')
})

t.test('PostgreSQL that does not answer and cannot be started stops the run before any test, saying why', async (t) => {
  const port = await freePort()
  const { code, output } = await node('test/setup/prepare.ts', { TEST_DATABASE_URL: `postgres://root@127.0.0.1:${port}/test` })
  t.equal(code, 1)
  t.match(output, `setup: PostgreSQL at 127.0.0.1:${port} does not answer`)
})

t.test('the summary at the end of npm test: which files did not run and why; under CI, a failure', async (t) => {
  const log = scratchLog(t)
  const docs = { file: 'test/system/browser/docs-page.test.ts', tools: ['chromium'], reason: 'not installed: chromium (Debian package chromium)' }
  writeFileSync(log, `${JSON.stringify(docs)}\n${JSON.stringify(docs)}\n`)
  t.same(readNotRun(log), [docs], 'a file recorded twice is listed once')
  t.same(readNotRun(join(log, '..', 'nothing.jsonl')), [], 'no log: every test ran')

  const why = { chromium: 'not root, and sudo is missing or asks for a password: install it by hand (apt-get install chromium)' }
  const local = notRunSummary([docs], why, false)
  t.same(local.lines, [
    'not run: tests of 1 file, for want of a program',
    '  test/system/browser/docs-page.test.ts: not installed: chromium (Debian package chromium)',
    'why the setup did not install it:',
    `  chromium: ${why.chromium}`,
  ])
  t.equal(local.fails, false, 'on a machine of ours, the run passes')
  const ci = notRunSummary([docs], why, true)
  t.equal(ci.fails, true, 'under CI, it fails')
  t.match(ci.lines.at(-1), 'CI is set: a test that did not run fails the run')
  t.same(notRunSummary([], why, true), { lines: [], fails: false }, 'every test ran: nothing to say')
})

t.test('the failures named again at the end of npm test: the deepest failed points of real tap output, with where and why', async (t) => {
  const dir = mkdtempSync(join(ROOT, 'test', '.failing-fixture-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const fixture = join(dir, 'fixture.mts')
  writeFileSync(
    fixture,
    [
      "import t from 'tap'",
      "t.test('outer', async (t) => { t.test('inner', async (t) => { t.equal(1, 2, 'one is two'); t.ok(true, 'fine') }) })",
      "t.test('thrown', async () => { throw new Error('the store went away') })",
      "t.test('passing', async (t) => t.ok(true))",
    ].join('\n'),
  )
  const { code, output } = await node(fixture, {})
  t.equal(code, 1, 'the fixture fails')

  const failures = new Failures()
  for (const line of output.split('\n')) failures.line(line)
  const report = failures.report()
  t.same(report.map((lines) => lines[0]), ['outer > inner > one is two', 'thrown > the store went away'], 'the failed points, not the subtests they failed')
  t.match(report[0]!.join('\n'), /at test\/\.failing-fixture-\w+\/fixture\.mts:2\n.*diff: --- expected\n.*\n.*\n.*-2\n.*\+1/, 'where, and the difference')

  const crashed = new Failures()
  for (const line of ['TAP version 14', '1..1', '# Subtest: test/a.test.ts', '    1..0 # no tests found', 'not ok 1 - test/a.test.ts', '  ---', '  exitCode: 1', '  signal: null', '  ...']) crashed.line(line)
  t.same(crashed.report(), [['test/a.test.ts', '    exitCode: 1']], 'a file that failed with no failing point is named itself')

  const many = new Failures()
  for (const line of ['1..25', ...Array.from({ length: 25 }, (_, index) => `not ok ${index + 1} - point ${index + 1}`)]) many.line(line)
  const cut = many.report()
  t.equal(cut.length, 21, 'at most 20, then a line')
  t.same(cut.at(-1), ['… and 5 more'])
})
