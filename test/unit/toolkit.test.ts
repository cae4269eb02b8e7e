import { spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { waitFor } from '../support/poll.js'
import { freePort } from '../support/ports.js'
import { spawnNode, waitUntilServing } from '../support/processes.js'

t.test('waitFor returns the first good value', async (t) => {
  let n = 0
  t.equal(await waitFor('n to reach 3', () => ++n, { until: (value) => value >= 3, everyMs: 1 }), 3)
})

t.test('on timeout waitFor says what it waited for and what it last saw', async (t) => {
  await t.rejects(waitFor('the count to reach 10', () => ({ count: 2 }), { until: (seen) => seen.count >= 10, timeoutMs: 50, everyMs: 10 }), {
    message: /timed out after 50 ms waiting for the count to reach 10; last saw \{ count: 2 \}/,
  })
  await t.rejects(
    waitFor('the server to answer', () => Promise.reject(new Error('connect ECONNREFUSED')), { timeoutMs: 30, everyMs: 10 }),
    { message: /waiting for the server to answer; last saw error: connect ECONNREFUSED/ },
  )
})

t.test('freePort gives a port we can listen on', async (t) => {
  const port = await freePort()
  const server = createServer().listen(port, '127.0.0.1')
  await once(server, 'listening')
  t.equal((server.address() as { port: number }).port, port)
  server.close()
})

t.test('a child process: its output is kept, and one that exits early fails the wait at once with that output', async (t) => {
  const child = spawnNode('-e', { name: 'early-exit', args: ['console.error("cannot start: no config"); process.exit(3)'] })
  await t.rejects(waitUntilServing(child, `http://127.0.0.1:${await freePort()}/`, 10_000), {
    message: /early-exit exited \(3\) before it answered[\s\S]*cannot start: no config/,
  })
  t.equal(child.running(), false)
})

t.test('stop ends a paused child', async (t) => {
  const child = spawnNode('-e', { name: 'sleeper', args: ['setInterval(() => {}, 1000)'] })
  child.pause()
  await child.stop(2000)
  t.equal(child.running(), false)
  t.equal(child.child.signalCode, 'SIGTERM', 'SIGTERM was enough once it was resumed')
})

t.test('a process a test spawns does not carry tap\'s process tracker (support/untracked-children.mjs)', async (t) => {
  const child = spawnSync(process.execPath, ['-p', 'process.env.NODE_OPTIONS ?? ""'], { encoding: 'utf8' })
  t.equal(child.status, 0)
  t.notMatch(child.stdout, /@tapjs\/processinfo/, `NODE_OPTIONS of the child: ${child.stdout.trim()}`)
})

t.test("npm test's own processes do not load tap: its root test would end them with SIGALRM 30 s in", async (t) => {
  // npm-test.ts and passes.ts run the passes for minutes; tap belongs only in the test files.
  const dir = mkdtempSync(join(tmpdir(), 'chat-auth-loaded-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'modules.txt')
  const setup = ['not-run', 'passes', 'prepare', 'side-by-side'].map((name) => `await import('./test/setup/${name}.ts')`).join(';')
  const child = spawnSync(process.execPath, ['--import=tsx', '--import=./test/support/loaded-modules.mjs', '--input-type=module', '-e', setup], {
    cwd: fileURLToPath(new URL('../../', import.meta.url)),
    env: { PATH: process.env.PATH, LOADED_MODULES_FILE: file },
    encoding: 'utf8',
  })
  t.equal(child.status, 0, child.stderr)
  const loaded = readFileSync(file, 'utf8').split('\n')
  t.ok(loaded.some((line) => line.includes('test/setup/passes.ts')), 'the record lists the setup modules')
  t.strictSame(loaded.filter((line) => /node_modules\/(tap|@tapjs\/core)\//.test(line)), [], 'no module of tap')
})
