import { fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/**
 * A TCP proxy the test controls, standing between one node and Redis, in a child process
 * of its own (tcp-proxy-process.mjs): the driver's load never delays the proxied bytes.
 * Connections are told apart by their first bytes (the bus names its connections
 * `<prefix>:sub:<node>` and `<prefix>:cmd:<node>`), so a fault can hit the subscriber alone.
 */
export interface TcpProxy {
  readonly port: number
  /** live connections, optionally those whose first bytes contain `match` */
  count(match?: string): Promise<number>
  /** Existing matching connections go half-open for good: every byte, both ways, is swallowed. New ones pass. */
  blackhole(match?: string): Promise<number>
  /** Existing matching connections are reset (RST). */
  reset(match?: string): Promise<number>
  /** Stop reading from Redis on matching connections (a subscriber too slow to keep up), until `resume`. */
  stall(match?: string): Promise<number>
  resume(): Promise<number>
  /** Refuse (reset) every new connection until `accept` is called. */
  refuse(): Promise<number>
  accept(): Promise<number>
  close(): Promise<void>
}

const SCRIPT = fileURLToPath(new URL('./tcp-proxy-process.mjs', import.meta.url))

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const child = fork(SCRIPT, [String(targetPort), targetHost], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = new Map<number, (result: number) => void>()
  let nextId = 0
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`tcp proxy exited with ${code}`)))
    child.on('message', (message: { ready?: number; id?: number; result?: number }) => {
      if (message.ready !== undefined) resolve(message.ready)
      else waiting.get(message.id!)?.(message.result!)
    })
  })
  const op = (name: string, match?: string) =>
    new Promise<number>((resolve) => {
      const id = nextId++
      waiting.set(id, (result) => {
        waiting.delete(id)
        resolve(result)
      })
      child.send({ id, op: name, match })
    })
  return {
    port,
    count: (match) => op('count', match),
    blackhole: (match) => op('blackhole', match),
    reset: (match) => op('reset', match),
    stall: (match) => op('stall', match),
    resume: () => op('resume'),
    refuse: () => op('refuse'),
    accept: () => op('accept'),
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      child.kill('SIGTERM')
      await exited
    },
  }
}
