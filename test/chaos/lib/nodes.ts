import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { freePort, waitFor } from './services.js'

/** `node dist/src/cli.js serve` as a child process; the CLI path can be overridden for experiments. */
export const CLI = process.env.CHAT_AUTH_CLI ?? fileURLToPath(new URL('../../../dist/src/cli.js', import.meta.url))

export const ADMIN_TOKEN = 'chaos-admin-token-0123456789abcdef'
export const JWT_SECRET = 'chaos-jwt-secret-that-is-at-least-32-bytes-long!'

export interface NodeProcess {
  readonly name: string
  readonly port: number
  readonly url: string
  readonly child: ChildProcess
  /** what the node wrote to stderr/stdout (last 64 KiB) */
  output(): string
  pause(): void
  resume(): void
  stop(): Promise<void>
}

export async function startNode(name: string, env: Record<string, string>, options: { waitReady?: boolean } = {}): Promise<NodeProcess> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build first`)
  const port = await freePort()
  const child = spawn(process.execPath, [CLI, 'serve'], {
    env: {
      PATH: process.env.PATH ?? '',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      SEED_DEMO: 'false',
      ADMIN_TOKEN,
      JWT_SECRET,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-65536)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  const url = `http://127.0.0.1:${port}`
  const node: NodeProcess = {
    name,
    port,
    url,
    child,
    output: () => output,
    pause: () => void child.kill('SIGSTOP'),
    resume: () => void child.kill('SIGCONT'),
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return
      child.kill('SIGCONT')
      child.kill('SIGTERM')
      const done = new Promise<void>((resolve) => child.once('exit', () => resolve()))
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
      await done
      clearTimeout(timer)
    },
  }
  try {
    await waitFor(
      `${name} to ${options.waitReady === false ? 'listen' : 'be ready'}`,
      async () => {
        if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${output}`)
        const response = await fetch(`${url}/${options.waitReady === false ? 'healthz' : 'readyz'}`)
        await response.arrayBuffer()
        return response.status === 200
      },
      20_000,
    )
  } catch (error) {
    await node.stop()
    throw new Error(`${(error as Error).message}\n--- ${name} output ---\n${output}`)
  }
  return node
}

// ── the HTTP API, as a client sees it ─────────────────────────────────────────
export interface Answer<T = any> {
  status: number
  body: T
}

export async function call<T = any>(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer<T>> {
  const response = await fetch(base + path, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  })
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // not JSON
  }
  return { status: response.status, body: parsed as T }
}

export const admin = <T = any>(base: string, method: string, path: string, body?: unknown) =>
  call<T>(base, method, path, body, { authorization: `Bearer ${ADMIN_TOKEN}` })

export const verify = (base: string, token: string) => call(base, 'GET', '/rest/v1/auth/verify', undefined, { authorization: `Bearer ${token}` })

/** A company with one agent and one API key, made through the admin API of SPEC §4. */
export async function setupCompany(base: string, name = 'Acme'): Promise<{ companyId: string; agentId: string; keyId: string; keySecret: string }> {
  const company = await admin(base, 'POST', '/admin/v1/companies', { name })
  if (company.status !== 201) throw new Error(`create company: ${company.status} ${JSON.stringify(company.body)}`)
  const agent = await admin(base, 'POST', `/admin/v1/companies/${company.body.id}/agents`, { name: 'Agent' })
  if (agent.status !== 201) throw new Error(`create agent: ${agent.status} ${JSON.stringify(agent.body)}`)
  const key = await admin(base, 'POST', `/admin/v1/companies/${company.body.id}/api-keys`, { name: 'key' })
  if (key.status !== 201) throw new Error(`create key: ${key.status} ${JSON.stringify(key.body)}`)
  return { companyId: company.body.id, agentId: agent.body.id, keyId: key.body.keyId, keySecret: key.body.keySecret }
}
