import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { faketimeLibrary } from '../setup/tools.js'
import { ADMIN_TOKEN, JWT_SECRET, NODE_INTERNALS_ENV, TEST_CACHE_SIZE } from './constants.js'
import { waitFor } from './poll.js'
import { freePort } from './ports.js'

/** The package root, whether this file runs from test/support/ (tap) or dist/test/support/ (bench). */
export const ROOT = fileURLToPath(new URL(import.meta.url.includes('/dist/') ? '../../../' : '../../', import.meta.url))
/** `chat-auth` as built by `npm run build`; CHAT_AUTH_CLI points the process tests at another build. */
export const CLI = process.env.CHAT_AUTH_CLI ?? `${ROOT}dist/src/cli.js`

export interface ChildHandle {
  readonly name: string
  readonly child: ChildProcess
  readonly pid: number
  /** the tail of what it wrote to stdout and stderr */
  output(): string
  /** true until the process exited */
  running(): boolean
  /** SIGSTOP: it stays connected but answers nothing, until `resume` */
  pause(): void
  resume(): void
  /** SIGKILL: no shutdown hook runs */
  kill9(): Promise<void>
  /** SIGTERM (after SIGCONT, should it be paused), then SIGKILL once `graceMs` passed */
  stop(graceMs?: number): Promise<void>
}

export interface SpawnOptions {
  name: string
  /** the whole environment of the child: nothing of ours leaks into it but PATH, unless `inheritEnv` */
  env?: Record<string, string | undefined>
  inheritEnv?: boolean
  cwd?: string
  /** an IPC channel: a child that watches it exits when we die, even by SIGKILL */
  ipc?: boolean
  /** how much output to keep (default 64 KiB) */
  keepBytes?: number
}

export interface NodeSpawnOptions extends SpawnOptions {
  args?: string[]
  nodeFlags?: string[]
  /**
   * The child's wall clock this far off ours, as faketime writes it (`-30s`, `+0.8s`):
   * Debian's libfaketime is preloaded into it (the child is still the node itself, so
   * `stop`, `pause` and `kill9` reach it). Its monotonic clock, and so its timers, are left
   * alone (FAKETIME_DONT_FAKE_MONOTONIC). A test that uses it takes its `skip` from
   * `missing('faketime')` (test/setup/tools.ts).
   */
  clockOffset?: string
}

/** A Node script as a child process (see `spawnProcess`). */
export function spawnNode(script: string, options: NodeSpawnOptions): ChildHandle {
  const args = [...(options.nodeFlags ?? []), script, ...(options.args ?? [])]
  if (options.clockOffset === undefined) return spawnProcess(process.execPath, args, options)
  const library = faketimeLibrary()
  if (library === undefined) throw new Error('libfaketime is not installed (Debian package faketime)')
  const faked = { LD_PRELOAD: library, FAKETIME: options.clockOffset, FAKETIME_DONT_FAKE_MONOTONIC: '1' }
  return spawnProcess(process.execPath, args, { ...options, env: { ...options.env, ...faked } })
}

/** A child process whose output we keep and which we can pause, stop or kill. */
export function spawnProcess(command: string, args: string[], options: SpawnOptions): ChildHandle {
  const child = spawn(command, args, {
    cwd: options.cwd ?? ROOT,
    env: { ...(options.inheritEnv ? process.env : { PATH: process.env.PATH ?? '' }), ...NODE_INTERNALS_ENV, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe', ...(options.ipc ? (['ipc'] as const) : [])],
  })
  const keepBytes = options.keepBytes ?? 65_536
  let output = ''
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-keepBytes)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  let failed = false
  const running = () => !failed && child.exitCode === null && child.signalCode === null
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    // it never started (no such command): say so in its output instead of crashing the test
    child.once('error', (error) => {
      failed = true
      output += `\n${command}: ${error.message}`
      resolve()
    })
  })
  return {
    name: options.name,
    child,
    pid: child.pid ?? -1,
    output: () => output,
    running,
    pause: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
    async kill9() {
      if (!running()) return
      child.kill('SIGKILL')
      await exited
    },
    async stop(graceMs = 5000) {
      if (!running()) return
      child.kill('SIGCONT')
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
      await exited
      clearTimeout(timer)
    },
  }
}

/**
 * Waits until `url` answers 200. Fails at once, with the process's output, if it exits
 * first; on timeout it stops the process and says what the last probe saw and what the
 * process wrote.
 */
export async function waitUntilServing(proc: ChildHandle, url: string, timeoutMs = 60_000): Promise<void> {
  try {
    await waitFor(
      `${proc.name} to answer 200 on ${url}`,
      async () => {
        if (!proc.running()) return { exited: proc.child.exitCode ?? proc.child.signalCode }
        const response = await fetch(url, { signal: AbortSignal.timeout(5000) })
        await response.arrayBuffer()
        return { status: response.status }
      },
      { timeoutMs, everyMs: 50, until: (seen) => 'exited' in seen || seen.status === 200 },
    ).then((seen) => {
      if ('exited' in seen) throw new Error(`${proc.name} exited (${seen.exited}) before it answered on ${url}`)
    })
  } catch (error) {
    await proc.stop()
    throw new Error(`${(error as Error).message}\n--- ${proc.name} output ---\n${proc.output()}`)
  }
}

export interface GatewayProcess extends ChildHandle {
  readonly port: number
  readonly url: string
}

export interface GatewayOptions {
  name?: string
  /** wait for /readyz (the default: the node trusts its cache) or only for /healthz (it listens) */
  waitFor?: 'ready' | 'listening'
  /** stop the node when the test ends */
  teardown?: (fn: () => unknown) => void
  timeoutMs?: number
  /** its wall clock this far off ours (see `NodeSpawnOptions.clockOffset`) */
  clockOffset?: string
}

/**
 * `chat-auth serve` (the built CLI) as a real process on a free port, with the test admin
 * token and JWT secret unless `env` says otherwise; resolved once it answers.
 */
export async function startGatewayProcess(env: Record<string, string>, options: GatewayOptions = {}): Promise<GatewayProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`)
  const name = options.name ?? 'chat-auth'
  const port = await freePort()
  const proc = spawnNode(CLI, {
    name,
    args: ['serve'],
    ...(options.clockOffset !== undefined ? { clockOffset: options.clockOffset } : {}),
    // KEEP_ALIVE_TIMEOUT 3 s: fetch (undici) then drops an idle connection after 1 s of its own,
    // so a stop does not wait out the node's 2 s drain for the test's idle connections.
    env: { HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', SEED_DEMO: 'false', CACHE_SIZE: TEST_CACHE_SIZE, KEEP_ALIVE_TIMEOUT: '3', ADMIN_TOKEN, JWT_SECRET, ...env },
  })
  options.teardown?.(() => proc.stop())
  const url = `http://127.0.0.1:${port}`
  await waitUntilServing(proc, `${url}/${options.waitFor === 'listening' ? 'healthz' : 'readyz'}`, options.timeoutMs)
  return { ...proc, port, url }
}
