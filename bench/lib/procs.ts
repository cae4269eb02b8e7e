import { spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

/** The package root, from dist/bench/lib/ (compiled) or bench/lib/ (tsx). */
export const ROOT = fileURLToPath(new URL(import.meta.url.includes('/dist/') ? '../../../' : '../../', import.meta.url))
export const DIST = ROOT + 'dist/'

export interface Proc {
  name: string
  pid: number
  url: string
  child: ChildProcess
  /** resident set size now, MB (undefined once gone or off Linux) */
  rssMb(): number | undefined
  /** peak resident set size, MB */
  peakRssMb(): number | undefined
  output(): string
  /** with ipc: the node's memory before and after a full GC (bench/node-host.ts) */
  memory(): Promise<NodeMemory | undefined>
  stop(): Promise<void>
}

export interface NodeMemory {
  gc: boolean
  before: NodeJS.MemoryUsage
  after: NodeJS.MemoryUsage
  cached: { users: number; agents: number; apiKeys: number }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

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
  const child = spawn(process.execPath, [...(options.nodeFlags ?? []), options.script, ...(options.args ?? [])], {
    cwd: ROOT,
    env: { ...process.env, ...options.env, PORT: String(options.port), HOST: '127.0.0.1' },
    // always an IPC channel: the children exit when it closes, even if the kit was SIGKILLed
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  })
  let output = ''
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  let exited: number | null | undefined
  const exit = new Promise<void>((resolve) =>
    child.on('exit', (code, signal) => {
      exited = code ?? (signal ? -1 : 0)
      resolve()
    }),
  )

  const url = `http://127.0.0.1:${options.port}`
  const deadline = Date.now() + (options.timeoutMs ?? 60_000)
  for (;;) {
    if (exited !== undefined) throw new Error(`${options.name} exited (${exited}) before it was ready:\n${output}`)
    try {
      const response = await fetch(url + (options.readyPath ?? '/healthz'))
      await response.arrayBuffer()
      if (response.status === 200) break
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`${options.name} was not ready within ${options.timeoutMs ?? 60_000} ms:\n${output}`)
    }
    await new Promise((r) => setTimeout(r, 100))
  }

  const pid = child.pid!
  return {
    name: options.name,
    pid,
    url,
    child,
    rssMb: () => procStatus(pid, 'VmRSS'),
    peakRssMb: () => procStatus(pid, 'VmHWM'),
    output: () => output,
    memory: () =>
      new Promise<NodeMemory | undefined>((resolve) => {
        if (!options.ipc || exited !== undefined) return resolve(undefined)
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
    async stop() {
      if (exited !== undefined) return
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exit
      clearTimeout(timer)
    },
  }
}
