import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { ADMIN_TOKEN, JWT_SECRET, STORE } from '../support/constants.js'
import { migratedDataDir } from '../support/pglite-data-dir.js'
import { freePort } from '../support/ports.js'
import { startGatewayProcess } from '../support/processes.js'

/**
 * Process lifecycle: SIGTERM to what the README says to run stops the server, and a
 * SIGTERM under keep-alive load resets no request. Independent of the store: runs once,
 * in the PGlite pass.
 */
const root = fileURLToPath(new URL('../../', import.meta.url))

const portAccepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)))
    socket.on('error', () => resolve(false))
  })

// `npm start` builds the package first, and PGlite starts slowly: on a busy 2-core machine each
// can take a minute.
t.setTimeout(300_000)

if (STORE !== 'pglite') {
  t.pass('the lifecycle tests run in the PGlite pass')
} else {
  t.test('SIGTERM to `npm start` stops the server, not only npm', async (t) => {
    // A copy of the package, so that its build does not rewrite the dist/ other tests run.
    // Its dist/ comes along: with the build info in it (tsconfig.json's "incremental"), its
    // build (tsc -b) finds nothing changed and checks and writes nothing, instead of a whole
    // tsc run.
    const dir = mkdtempSync(join(tmpdir(), 'chat-auth-npm-start-'))
    t.teardown(() => rmSync(dir, { recursive: true, force: true }))
    for (const entry of ['package.json', 'tsconfig.json', 'src', 'console', 'bench', 'migrations', 'test/support', 'dist']) cpSync(join(root, entry), join(dir, entry), { recursive: true })
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'))

    const port = await freePort()
    const npm = spawn('npm', ['start'], {
      cwd: dir,
      // its own process group, so that the teardown can end whatever is left
      detached: true,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: await migratedDataDir(t), ADMIN_TOKEN, JWT_SECRET, SEED_DEMO: 'false', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    t.teardown(() => {
      try {
        process.kill(-npm.pid!, 'SIGKILL')
      } catch {}
    })
    let output = ''
    npm.stdout!.on('data', (chunk) => (output += chunk))
    npm.stderr!.on('data', (chunk) => (output += chunk))
    const exited = once(npm, 'exit')
    const deadline = Date.now() + 150_000
    while (!output.includes('"chat-auth listening"')) {
      if (npm.exitCode !== null) throw new Error(`npm start exited with ${npm.exitCode}:\n${output}`)
      if (Date.now() > deadline) throw new Error(`npm start did not listen in time:\n${output}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    t.ok(await portAccepts(port), 'the server listens')

    npm.kill('SIGTERM') // what a process manager or a container runtime sends to the process it started
    // unref: once npm exited, this timer must not keep the test process alive for its 20 s
    const [code] = (await Promise.race([exited, new Promise((resolve) => setTimeout(() => resolve(['timeout']), 20_000).unref())])) as [unknown]
    t.equal(code, 0, 'npm exits, with the server’s exit code 0')
    t.match(output, /"msg":"shutting down"/, 'the server itself got the signal and shut down')
    let serving = true
    for (let i = 0; i < 50 && serving; i++) {
      serving = await portAccepts(port)
      if (serving) await new Promise((resolve) => setTimeout(resolve, 100))
    }
    t.notOk(serving, 'nothing serves on the port any more')
  })

  t.test('SIGTERM under keep-alive load: in-flight requests complete, no client sees a reset', async (t) => {
    const node = await startGatewayProcess({ DATA_DIR: await migratedDataDir(t), ADMIN_TOKEN, JWT_SECRET }, { teardown: t.teardown.bind(t), timeoutMs: 180_000 })
    const port = Number(new URL(node.url).port)
    const exited = once(node.child, 'exit')
    const outcomes = new Map<string, number>()
    const count = (outcome: string) => outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1)
    let signalled = false
    let afterSignal = 0

    const request = (agent: http.Agent) =>
      new Promise<string>((resolve) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/healthz', agent }, (response) => {
          response.resume()
          response.on('end', () => resolve(String(response.statusCode)))
          response.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message))
        })
        req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message))
      })

    const client = async () => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      try {
        for (;;) {
          const outcome = await request(agent)
          count(outcome)
          if (signalled && outcome === '200') afterSignal++
          if (outcome === 'ECONNREFUSED') return // the server stopped listening: done
        }
      } finally {
        agent.destroy()
      }
    }
    const clients = Array.from({ length: 8 }, client)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    signalled = true
    node.child.kill('SIGTERM')
    await Promise.all(clients)
    const [code] = (await exited) as [number | null]

    const seen = Object.fromEntries(outcomes)
    t.equal(code, 0, 'the node exits 0')
    t.ok((outcomes.get('200') ?? 0) > 100, `requests were answered (${JSON.stringify(seen)})`)
    t.same(
      [...outcomes.keys()].filter((outcome) => outcome !== '200' && outcome !== 'ECONNREFUSED'),
      [],
      'every request sent on an open connection was answered 200: no reset, no hang-up, no 503',
    )
    t.ok(afterSignal > 0, `requests sent after the signal on open connections were answered (${afterSignal})`)
  })
}
