import { readFileSync } from 'node:fs'
import { spawnNode, waitUntilServing, ROOT, type ChildHandle } from '../../test/support/processes.js'

export { freePort } from '../../test/support/ports.js'
export { ROOT }
export const DIST = ROOT + 'dist/'

/** A process of the bench: the test toolkit's child, plus what the bench measures of it. */
export interface Proc {
  name: string
  pid: number
  url: string
  child: ChildHandle['child']
  /** resident set size now, MB (undefined once gone or off Linux) */
  rssMb(): number | undefined
  /** peak resident set size, MB */
  peakRssMb(): number | undefined
  output(): string
  /** with ipc: the node's memory before and after a full GC (bench/node-host.ts) */
  memory(): Promise<NodeMemory | undefined>
  /** with ipc: opens and holds a session for each token on the node (bench/node-host.ts); sessions open in all, and refused */
  openSessions(tokens: string[]): Promise<{ open: number; refused: number }>
  stop(): Promise<void>
}

export interface NodeMemory {
  gc: boolean
  before: NodeJS.MemoryUsage
  after: NodeJS.MemoryUsage
  cached: { users: number; agents: number; apiKeys: number }
}

/** CPU seconds (user + system) a process has used so far, from /proc (undefined off Linux or once gone). */
export function cpuSeconds(pid: number): number | undefined {
  return statCpuSeconds(`/proc/${pid}/stat`)
}

/**
 * CPU seconds of a process's main thread alone (its thread id is the process's). The rest of a
 * Node process's CPU is its helper threads': V8's concurrent marking and optimising compiler,
 * libuv's pool.
 */
export function mainThreadCpuSeconds(pid: number): number | undefined {
  return statCpuSeconds(`/proc/${pid}/task/${pid}/stat`)
}

function statCpuSeconds(path: string): number | undefined {
  try {
    // fields after the command's closing parenthesis: utime and stime are the 12th and 13th
    const fields = readFileSync(path, 'utf8').split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return undefined
  }
}
/** Linux's USER_HZ: /proc counts CPU time in hundredths of a second on every architecture Node runs on. */
const CLOCK_TICKS = 100

function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)
    return match ? Number(match[1]) / 1024 : undefined
  } catch {
    return undefined
  }
}

export interface StartOptions {
  name: string
  script: string
  args?: string[]
  nodeFlags?: string[]
  env: Record<string, string | undefined>
  port: number
  /** polled until it answers 200 */
  readyPath?: string
  timeoutMs?: number
  /** answers memory probes on its IPC channel (bench/node-host.ts) */
  ipc?: boolean
}

/** Starts a Node process serving HTTP on 127.0.0.1:port and waits until readyPath answers 200. */
export async function startProcess(options: StartOptions): Promise<Proc> {
  const proc = spawnNode(options.script, {
    name: options.name,
    args: options.args,
    nodeFlags: options.nodeFlags,
    inheritEnv: true,
    env: { ...options.env, PORT: String(options.port), HOST: '127.0.0.1' },
    // always an IPC channel: the children exit when it closes, even if the kit was SIGKILLed
    ipc: true,
    keepBytes: 20_000,
  })
  const url = `http://127.0.0.1:${options.port}`
  await waitUntilServing(proc, url + (options.readyPath ?? '/healthz'), options.timeoutMs ?? 60_000)
  const { child, pid } = proc
  return {
    name: options.name,
    pid,
    url,
    child,
    rssMb: () => procStatus(pid, 'VmRSS'),
    peakRssMb: () => procStatus(pid, 'VmHWM'),
    output: proc.output,
    memory: () =>
      new Promise<NodeMemory | undefined>((resolve) => {
        if (!options.ipc || !proc.running()) return resolve(undefined)
        const timer = setTimeout(() => {
          child.off('message', onMessage)
          resolve(undefined)
        }, 30_000)
        const onMessage = (message: { type?: string }) => {
          if (message?.type !== 'memory') return
          clearTimeout(timer)
          child.off('message', onMessage)
          resolve(message as unknown as NodeMemory)
        }
        child.on('message', onMessage)
        child.send({ type: 'memory' })
      }),
    openSessions: (tokens) =>
      new Promise((resolve, reject) => {
        if (!options.ipc || !proc.running()) return reject(new Error('no IPC channel to the node'))
        const onMessage = (message: { type?: string; open?: number; refused?: number }) => {
          if (message?.type !== 'sessions') return
          child.off('message', onMessage)
          resolve({ open: message.open ?? 0, refused: message.refused ?? 0 })
        }
        child.on('message', onMessage)
        child.send({ type: 'sessions', tokens })
      }),
    stop: async () => {
      // bench/node-host.ts closes its server at once when the IPC channel closes; a SIGTERM
      // would drain for up to 2 s while the kit's idle keep-alive connections (its fetch
      // calls) stay open, a pause the bench has no use for. SIGTERM remains the fallback.
      if (options.ipc && child.connected) {
        const exited = new Promise<void>((resolve) => {
          if (!proc.running()) return resolve()
          child.once('exit', () => resolve())
        })
        child.disconnect()
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000).unref())])
      }
      await proc.stop(10_000)
    },
  }
}
