import { execFileSync } from 'node:child_process'
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
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

/** What a Redis server (or sentinel) on 127.0.0.1:port answers to PING, on a connection of its own. */
async function pingReply(port: number): Promise<string> {
  const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  probe.on('error', () => {})
  try {
    await probe.connect()
    return await probe.ping()
  } finally {
    probe.disconnect()
  }
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
        return pingReply(port)
      },
      // A 2-core machine busy with other work has taken over 15 s to start one (the chaos run's Redis restart).
      { until: (reply) => reply === 'PONG', timeoutMs: 60_000 },
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

// ── Redis Sentinel ───────────────────────────────────────────────────────────
export interface SentinelSet {
  /** the master name the sentinels monitor */
  readonly name: string
  /** the two data servers' ports (the first starts as primary, the second as its replica) */
  readonly dataPorts: readonly number[]
  readonly sentinelPorts: readonly number[]
  /** REDIS_SENTINELS for a node */
  readonly sentinelsEnv: string
  /** the port of the primary the sentinels name now (asks the first that answers) */
  primaryPort(): Promise<number>
  /** ports named as primary by each sentinel (undefined: that one did not answer) */
  namedPorts(): Promise<Array<number | undefined>>
  /** a plain client on one data server (by port) or sentinel, for faults and checks */
  client(port: number): Promise<Redis>
  /** SENTINEL FAILOVER, resolved once every sentinel names the other server */
  failover(timeoutMs?: number): Promise<number>
  /** SIGKILL of the primary named now; resolves with its port once every sentinel names the other */
  killPrimary(timeoutMs?: number): Promise<number>
  /** starts a data server that was killed again, on its port, as the primary it was configured as */
  restart(port: number): Promise<void>
  /** resolves once the server on `port` reports the role (`master` or `slave`) */
  waitForRole(port: number, role: 'master' | 'slave', timeoutMs?: number): Promise<void>
  stop(): Promise<void>
}

/**
 * One primary, one replica and three sentinels (`redis-server --sentinel`), each on a free
 * port, with failover timings short enough for a test: a primary is down after 1 s
 * without an answer, and a failover may follow another after 4 s.
 */
export async function startSentinelSet(name = 'chat-auth'): Promise<SentinelSet> {
  const dir = mkdtempSync(join(tmpdir(), 'chat-auth-sentinel-'))
  const dataPorts = [await freePort(), await freePort()]
  const sentinelPorts = [await freePort(), await freePort(), await freePort()]
  const servers = new Map<number, ChildHandle>()
  const clients = new Map<number, Redis>()
  const client = async (port: number) => {
    let c = clients.get(port)
    if (!c) {
      c = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => 50, lazyConnect: true })
      c.on('error', () => {})
      clients.set(port, c)
    }
    return c
  }
  const launch = async (port: number, args: string[], label: string) => {
    const started = spawnProcess('redis-server', args, { name: label })
    servers.set(port, started)
    await waitFor(
      `${label} on port ${port} to answer PING`,
      async () => {
        if (!started.running()) throw new Error(`${label} exited: ${started.output()}`)
        return pingReply(port)
      },
      { until: (reply) => reply === 'PONG' },
    )
  }
  const dataArgs = (port: number) => [
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--loglevel', 'warning',
    '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0',
    // A replica's full sync writes an RDB file: into the temporary folder, not the working directory.
    '--dir', dir, '--dbfilename', `dump-${port}.rdb`,
  ]
  const [first, second] = dataPorts as [number, number]
  await launch(first, dataArgs(first), 'redis-primary')
  await launch(second, [...dataArgs(second), '--replicaof', '127.0.0.1', String(first)], 'redis-replica')
  for (const [i, port] of sentinelPorts.entries()) {
    const file = join(dir, `sentinel-${i}.conf`)
    writeFileSync(
      file,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${first} 2`,
        `sentinel down-after-milliseconds ${name} 1000`,
        `sentinel failover-timeout ${name} 2000`,
        `sentinel parallel-syncs ${name} 1`,
        '',
      ].join('\n'),
    )
    await launch(port, [file, '--sentinel', '--loglevel', 'warning'], `redis-sentinel-${i}`)
  }
  const named = async (port: number): Promise<number | undefined> => {
    const reply = (await (await client(port)).call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name).catch(() => undefined)) as string[] | undefined
    return reply ? Number(reply[1]) : undefined
  }
  const namedPorts = () => Promise.all(sentinelPorts.map(named))
  const failoverInProgress = async (sentinel: Redis) => {
    const fields = (await sentinel.call('SENTINEL', 'MASTER', name)) as string[]
    return fields[fields.indexOf('flags') + 1]!.includes('failover_in_progress')
  }
  const everyoneNames = (port: number, what: string, timeoutMs: number) =>
    waitFor(what, namedPorts, { until: (ports) => ports.every((p) => p === port), timeoutMs, everyMs: 50 })
  const set: SentinelSet = {
    name,
    dataPorts,
    sentinelPorts,
    sentinelsEnv: sentinelPorts.map((port) => `127.0.0.1:${port}`).join(','),
    async primaryPort() {
      for (const port of sentinelPorts) {
        const p = await named(port)
        if (p !== undefined) return p
      }
      throw new Error('no sentinel answered')
    },
    namedPorts,
    client,
    async failover(timeoutMs = 20_000) {
      const before = await set.primaryPort()
      const after = dataPorts.find((p) => p !== before)!
      const asked = await client(sentinelPorts[0]!)
      // Asked again whenever no sentinel names the new primary and none is failing over: a
      // sentinel refuses while it sees no replica fit for promotion (just after a resync), and
      // aborts a failover whose replica does not report its promotion within failover-timeout
      // (2 s here, which a loaded machine can miss), after which it names the old primary for good.
      await waitFor(
        `every sentinel to name ${after} after SENTINEL FAILOVER`,
        async () => {
          const ports = await namedPorts()
          if (!ports.includes(after) && !(await failoverInProgress(asked))) await asked.call('SENTINEL', 'FAILOVER', name).catch(() => {})
          return ports
        },
        { until: (ports) => ports.every((p) => p === after), timeoutMs, everyMs: 200 },
      )
      return after
    },
    async killPrimary(timeoutMs = 30_000) {
      const before = await set.primaryPort()
      await servers.get(before)?.kill9()
      clients.get(before)?.disconnect()
      clients.delete(before)
      await everyoneNames(dataPorts.find((p) => p !== before)!, `every sentinel to name a new primary after ${before} was killed`, timeoutMs)
      return before
    },
    async restart(port) {
      await launch(port, dataArgs(port), port === first ? 'redis-primary' : 'redis-replica')
    },
    async waitForRole(port, role, timeoutMs = 30_000) {
      await waitFor(`${port} to report role ${role}`, async () => ((await (await client(port)).call('ROLE')) as unknown[])[0], { until: (r) => r === role, timeoutMs, everyMs: 100 })
    },
    async stop() {
      for (const c of clients.values()) c.disconnect()
      await Promise.allSettled([...servers.values()].map((s) => s.stop(3000)))
      rmSync(dir, { recursive: true, force: true })
    },
  }
  return set
}
