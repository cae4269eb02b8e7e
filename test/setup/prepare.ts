import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { Redis } from 'ioredis'
import { PG_ADMIN_URL, pgReachable } from '../support/databases.js'
import { sleep } from '../support/poll.js'
import { PRETEND_MISSING_VARIABLE, TOOLS, TOOL_NAMES, locate, pretendedMissing, type ToolName } from './tools.js'

/**
 * What `npm test` needs before its first test: PostgreSQL and Redis up (started when they
 * are local and down), and the programs of tools.ts installed (from Debian's packages, when
 * they are missing and the machine allows it: root or passwordless sudo, apt reachable).
 * Alone: `node --import=tsx test/setup/prepare.ts`.
 */

export interface Prepared {
  /** why each tool that is still missing could not be installed */
  notInstalled: Partial<Record<ToolName, string>>
  /** set when PostgreSQL or Redis is down and could not be started: no test can run */
  fatal?: string
}

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

export async function prepare(say: (line: string) => void = (line) => console.log(`setup: ${line}`)): Promise<Prepared> {
  const fatal = (await ensurePostgres(say)) ?? (await ensureRedis(say))
  if (fatal) {
    say(fatal)
    return { notInstalled: {}, fatal }
  }
  const notInstalled = installMissingTools(say)
  for (const [name, why] of Object.entries(notInstalled)) say(`${name} is not installed, and its tests will skip: ${why}`)
  return { notInstalled }
}

// ── running commands ─────────────────────────────────────────────────────────
interface Ran {
  ok: boolean
  /** the tail of what it printed, or why it did not start */
  output: string
}

function run(command: string, args: string[]): Ran {
  const result = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 })
  const output = result.error ? result.error.message : `${result.stdout}${result.stderr}`.trim().split('\n').slice(-5).join(' / ')
  return { ok: result.status === 0, output }
}

/** The prefix that runs a command as root here, or why there is none. */
function asRoot(): string[] | { reason: string } {
  if (process.getuid?.() === 0) return []
  if (run('sudo', ['-n', 'true']).ok) return ['sudo', '-n']
  return { reason: 'not root, and sudo is missing or asks for a password' }
}

function runAsRoot(command: string, args: string[]): Ran {
  const prefix = asRoot()
  if (!Array.isArray(prefix)) return { ok: false, output: prefix.reason }
  const [first, ...rest] = [...prefix, command, ...args]
  return run(first!, rest)
}

async function waitUntil(probe: () => Promise<boolean>, seconds: number): Promise<boolean> {
  for (let i = 0; i < seconds; i++) {
    if (await probe()) return true
    await sleep(1000)
  }
  return probe()
}

const isLocal = (url: string) => ['127.0.0.1', 'localhost', '[::1]'].includes(new URL(url).hostname)

// ── PostgreSQL and Redis ─────────────────────────────────────────────────────
/** Undefined once PostgreSQL answers; else why it does not. */
async function ensurePostgres(say: (line: string) => void): Promise<string | undefined> {
  const up = () => pgReachable(PG_ADMIN_URL)
  if (await up()) return undefined
  const where = `PostgreSQL at ${new URL(PG_ADMIN_URL).host}`
  if (!isLocal(PG_ADMIN_URL)) return `${where} does not answer (TEST_DATABASE_URL)`
  const versions = existsSync('/etc/postgresql') ? readdirSync('/etc/postgresql').sort((a, b) => Number(a) - Number(b)) : []
  if (versions.length === 0) return `${where} does not answer, and no Debian cluster is in /etc/postgresql to start`
  say(`starting PostgreSQL ${versions.at(-1)}`)
  const started = runAsRoot('pg_ctlcluster', ['--skip-systemctl-redirect', versions.at(-1)!, 'main', 'start'])
  if (!started.ok) return `${where} does not answer, and pg_ctlcluster could not start it: ${started.output}`
  return (await waitUntil(up, 30)) ? undefined : `${where} was started but does not answer after 30 s`
}

async function redisAnswers(url: string): Promise<boolean> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 2000, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false })
  redis.on('error', () => {})
  try {
    await redis.connect()
    return (await redis.ping()) === 'PONG'
  } catch {
    return false
  } finally {
    redis.disconnect()
  }
}

/** Undefined once Redis answers; else why it does not. */
async function ensureRedis(say: (line: string) => void): Promise<string | undefined> {
  const up = () => redisAnswers(REDIS_URL)
  if (await up()) return undefined
  const where = `Redis at ${new URL(REDIS_URL).host}`
  if (!isLocal(REDIS_URL)) return `${where} does not answer (TEST_REDIS_URL)`
  say('starting Redis')
  // No persistence: the tests' keys are scratch, and so the server needs no folder of root's.
  const dir = join(tmpdir(), 'chat-auth-test-redis')
  mkdirSync(dir, { recursive: true })
  const port = new URL(REDIS_URL).port || '6379'
  const started = run('redis-server', ['--daemonize', 'yes', '--bind', '127.0.0.1', '-::1', '--port', port, '--save', '', '--appendonly', 'no', '--dir', dir, '--logfile', join(dir, 'redis.log')])
  if (!started.ok) return `${where} does not answer, and redis-server could not start it: ${started.output}`
  return (await waitUntil(up, 30)) ? undefined : `${where} was started but does not answer after 30 s`
}

// ── the tools' packages ──────────────────────────────────────────────────────
/** Installs the packages of the missing tools if it can; why each tool still missing is. */
function installMissingTools(say: (line: string) => void): Partial<Record<ToolName, string>> {
  const notInstalled: Partial<Record<ToolName, string>> = {}
  const toInstall: ToolName[] = []
  for (const name of TOOL_NAMES.filter((tool) => locate(tool) === undefined)) {
    if (pretendedMissing(name)) notInstalled[name] = `${PRETEND_MISSING_VARIABLE} pretends it cannot be installed`
    else toInstall.push(name)
  }
  if (toInstall.length === 0) return notInstalled
  const packages = toInstall.map((name) => TOOLS[name].debianPackage)
  const cannot = (why: string) => {
    for (const name of toInstall) notInstalled[name] = why
    return notInstalled
  }
  if (!run('apt-get', ['--version']).ok) return cannot('apt-get is not here (not a Debian-like system): install it by hand')
  const root = asRoot()
  if (!Array.isArray(root)) return cannot(`${root.reason}: install it by hand (apt-get install ${packages.join(' ')})`)

  say(`installing ${packages.join(' ')} (apt-get; a few minutes on a fresh machine)`)
  // The lock timeout waits out another apt run. A mirror it cannot reach is only a warning of
  // apt-get update: the install then says what it lacks.
  const lockTimeout = ['-o', 'DPkg::Lock::Timeout=300']
  const update = runAsRoot('apt-get', ['update', '-qq', ...lockTimeout])
  if (!update.ok) return cannot(`apt-get update failed: ${update.output}`)
  // `env` carries DEBIAN_FRONTEND through sudo.
  const install = runAsRoot('env', ['DEBIAN_FRONTEND=noninteractive', 'apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...lockTimeout, ...packages])
  for (const name of toInstall) {
    if (locate(name) !== undefined) continue
    notInstalled[name] = install.ok
      ? `apt-get installed ${TOOLS[name].debianPackage}, but none of ${TOOLS[name].candidates.join(', ')} is there`
      : `apt-get install ${packages.join(' ')} failed: ${install.output}${update.output ? ` (apt-get update: ${update.output})` : ''}`
  }
  return notInstalled
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.exit((await prepare()).fatal ? 1 : 0)
}
