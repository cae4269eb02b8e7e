import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

const CLI = fileURLToPath(new URL('../../dist/src/cli.js', import.meta.url))

export interface NodeProcess {
  url: string
  child: ChildProcess
  output: () => string
  /** SIGKILL: no shutdown hook runs, nothing is flushed by us. */
  kill9(): Promise<void>
  stop(): Promise<void>
}

export async function freePort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as { port: number }).port
  server.close()
  await once(server, 'close')
  return port
}

/** `chat-auth serve` as a real process (built into dist/ by `npm test`), ready when it logs its URL. */
export async function startNodeProcess(env: Record<string, string>, teardown?: (fn: () => unknown) => void): Promise<NodeProcess> {
  const port = await freePort()
  const child = spawn(process.execPath, [CLI, 'serve'], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', SEED_DEMO: 'false', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout!.on('data', (chunk) => (output += chunk))
  child.stderr!.on('data', (chunk) => (output += chunk))
  const exited = once(child, 'exit')
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGTERM')
    await exited
  }
  teardown?.(stop)
  const deadline = Date.now() + 30_000
  while (!output.includes('"chat-auth listening"')) {
    if (child.exitCode !== null) throw new Error(`node exited with ${child.exitCode}:\n${output}`)
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`node did not start in time:\n${output}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    output: () => output,
    async kill9() {
      child.kill('SIGKILL')
      await exited
    },
    stop,
  }
}
