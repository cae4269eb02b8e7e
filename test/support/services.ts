import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { runOnServer } from './databases.js'
import { sleep, waitFor } from './poll.js'
import { freePort } from './ports.js'
import { spawnProcess, type ChildHandle } from './processes.js'

/**
 * Real Redis and PostgreSQL processes for one test run, on free ports, in temporary
 * folders, removed afterwards. Nothing here is a mock.
 */

// ── Redis ────────────────────────────────────────────────────────────────────
export interface RedisServer {
  readonly port: number
  readonly url: string
  /** a plain client for fault injection (CLIENT KILL, CLIENT PAUSE, CONFIG SET…) */
  admin(): Promise<Redis>
  restart(downMs?: number): Promise<void>
  stop(): Promise<void>
}

export async function startRedis(): Promise<RedisServer> {
  const port = await freePort()
  let server: ChildHandle | undefined
  let client: Redis | undefined
  const launch = async () => {
    const started = spawnProcess('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning'], {
      name: 'redis-server',
    })
    server = started
    await waitFor(
      `redis-server on port ${port} to answer PING`,
      async () => {
        if (!started.running()) throw new Error(`redis-server exited: ${started.output()}`)
        const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
        probe.on('error', () => {})
        try {
          await probe.connect()
          return await probe.ping()
        } finally {
          probe.disconnect()
        }
      },
      { until: (reply) => reply === 'PONG' },
    )
  }
  await launch()
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async admin() {
      if (!client) {
        client = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 2, retryStrategy: () => 50 })
        client.on('error', () => {})
      }
      return client
    },
    async restart(downMs = 200) {
      await server?.stop(3000)
      await sleep(downMs)
      await launch()
    },
    async stop() {
      client?.disconnect()
      await server?.stop(3000)
    },
  }
}

// ── PostgreSQL ───────────────────────────────────────────────────────────────
export interface PostgresServer {
  readonly port: number
  /** a database URL on this server (the database is created) */
  readonly url: string
  restart(downMs?: number): Promise<void>
  stop(): Promise<void>
}

function postgresBin(): string {
  const root = '/usr/lib/postgresql'
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : []
  for (const version of versions) {
    const bin = join(root, version, 'bin')
    if (existsSync(join(bin, 'initdb'))) return bin
  }
  throw new Error('initdb not found under /usr/lib/postgresql/*/bin')
}

/** initdb into a temporary folder, pg_ctl start on a free port; as `postgres` when running as root. */
export async function startPostgres(): Promise<PostgresServer> {
  const bin = postgresBin()
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'chat-auth-pg-'))
  const data = join(dir, 'data')
  const asRoot = process.getuid?.() === 0
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim())
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim())
    chownSync(dir, uid, gid)
    chmodSync(dir, 0o700)
  }
  const run = (tool: string, args: string[]) => {
    const command = join(bin, tool)
    if (asRoot) execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' })
    else execFileSync(command, args, { stdio: 'pipe' })
  }
  const user = asRoot ? 'postgres' : (process.env.USER ?? 'postgres')
  run('initdb', ['-D', data, '-U', user, '--auth=trust', '--no-sync', '-E', 'UTF8'])
  const start = () =>
    run('pg_ctl', [
      '-D',
      data,
      '-l',
      join(dir, 'log'),
      '-w',
      '-t',
      '30',
      '-o',
      `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
      'start',
    ])
  const stop = (mode: 'fast' | 'immediate') => run('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '30', 'stop'])
  start()
  await runOnServer(`postgres://${user}@127.0.0.1:${port}/postgres`, 'CREATE DATABASE chat_auth')
  let stopped = false
  return {
    port,
    url: `postgres://${user}@127.0.0.1:${port}/chat_auth`,
    async restart(downMs = 300) {
      stop('immediate')
      await sleep(downMs)
      start()
    },
    async stop() {
      if (stopped) return
      stopped = true
      try {
        stop('immediate')
      } catch {
        // already down
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
