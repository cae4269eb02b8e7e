import { once } from 'node:events'
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { waitFor } from '../../../support/poll.js'
import { freePort } from '../../../support/ports.js'
import { ROOT, spawnProcess, type ChildHandle } from '../../../support/processes.js'
import { locate } from '../../../setup/tools.js'

/**
 * Real nginx and Caddy processes on free ports, run with the configs docs/proxies.md and
 * docker-compose.yml ship (read from those files here, so the docs cannot drift from what
 * is tested), in front of a real gateway node and an upstream that echoes what it receives.
 */

// ── the shipped configs ──────────────────────────────────────────────────────
/** The guide whose recipes the tests and the bench's `proxy` scenario run. */
export const RECIPES = ROOT + 'docs/proxies.md'

/**
 * The first fenced block of `language` in the recipes' page (or in another copy of the
 * recipes: `file`, such as an older README that held them, for a before/after bench).
 */
export function recipeBlock(language: string, file = RECIPES): string {
  const match = new RegExp('```' + language + '\\n([\\s\\S]*?)```').exec(readFileSync(file, 'utf8'))
  if (!match) throw new Error(`${file} has no \`\`\`${language} block`)
  return match[1]!
}

/** The nginx config docker-compose.yml ships (its `configs.nginx.content`), with compose's `$$` escapes resolved. */
export function composeNginxConfig(): string {
  const lines = readFileSync(ROOT + 'docker-compose.yml', 'utf8').split('\n')
  const configs = lines.findIndex((line) => line === 'configs:')
  const nginx = lines.findIndex((line, i) => i > configs && /^ {2}nginx:\s*$/.test(line))
  const content = lines.findIndex((line, i) => i > nginx && /^ {4}content: \|\s*$/.test(line))
  if (configs < 0 || nginx < 0 || content < 0) throw new Error('docker-compose.yml has no configs.nginx.content')
  const body: string[] = []
  for (const line of lines.slice(content + 1)) {
    if (line.trim() !== '' && !line.startsWith('      ')) break
    body.push(line.slice(6))
  }
  return body.join('\n').replaceAll('$$', '$')
}

export interface Addresses {
  /** host:port of the gateway */
  gateway: string
  /** host:port of the chat backend */
  backend: string
}

/**
 * The nginx recipe (`upstream`s and a `server`) for `startNginx({ server })`, pointed at
 * `addresses` and listening on 127.0.0.1:`port`. A README before the recipe named its own
 * upstreams held only the two locations: those are wrapped with plain `chat_auth` and
 * `chat_backend` upstreams, as the recipe then asked (the bench measures an older README's
 * recipe with `--proxy-readme`).
 */
export function readmeNginxServer(addresses: Addresses, port: number, file?: string): string {
  const block = recipeBlock('nginx', file)
  if (!/^server \{/m.test(block)) {
    return `upstream chat_backend { server ${addresses.backend}; }\nupstream chat_auth { server ${addresses.gateway}; }\nserver {\n  listen 127.0.0.1:${port};\n${block}\n}\n`
  }
  return substitute(block, { 'chat-auth:3000': addresses.gateway, 'chat-backend:8000': addresses.backend, 'listen 8080;': `listen 127.0.0.1:${port};` })
}

/** The Caddyfile recipe, pointed at `addresses` and listening on 127.0.0.1:`port`. */
export function readmeCaddyfile(addresses: Addresses, port: number, file?: string): string {
  return substitute(recipeBlock('caddyfile', file), {
    ':8080 {': `http://127.0.0.1:${port} {`,
    'chat-auth:3000': addresses.gateway,
    'chat-backend:8000': addresses.backend,
  })
}

/** Replaces each `from` (a host:port or a listen address) with `to`; fails when one is absent, so a renamed host cannot go unnoticed. */
export function substitute(text: string, replacements: Record<string, string>): string {
  let result = text
  for (const [from, to] of Object.entries(replacements)) {
    if (!result.includes(from)) throw new Error(`the shipped config no longer mentions ${from}`)
    result = result.replaceAll(from, to)
  }
  return result
}

// ── the upstream ─────────────────────────────────────────────────────────────
export interface Received {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
}

export interface Echo {
  port: number
  address: string
  received: Received[]
  /** TCP connections accepted so far */
  connections(): number
  close(): Promise<void>
}

/** An upstream that records every request and answers 200 with what it received (and `answerHeaders`). */
export async function startEcho(answerHeaders: Record<string, string> = {}): Promise<Echo> {
  const received: Received[] = []
  // Headers as large as nginx forwards (4 × 8 KB), as a backend behind it accepts them.
  const server: Server = createServer({ maxHeaderSize: 64 * 1024 }, (request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const entry = { method: request.method!, url: request.url!, headers: request.headers, body: Buffer.concat(chunks).toString() }
      received.push(entry)
      response.writeHead(200, { 'content-type': 'application/json', ...answerHeaders })
      response.end(JSON.stringify({ upstream: 'echo', ...entry }))
    })
  })
  let connections = 0
  server.on('connection', () => connections++)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    address: `127.0.0.1:${port}`,
    received,
    connections: () => connections,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** A stand-in for the gateway answering every call with `status` and `headers` (and an empty JSON body): what a proxy does then. */
export async function startStub(status: number, headers: Record<string, string> = {}): Promise<{ address: string; calls: () => number; close(): Promise<void> }> {
  let calls = 0
  const server = createServer((_request, response) => {
    calls++
    response.writeHead(status, { 'content-type': 'application/json', ...headers })
    response.end('{}')
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    calls: () => calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** Resolves once something accepts connections on `port`; fails at once if `proc` exits first. */
async function waitForPort(port: number, proc: ChildHandle): Promise<void> {
  const seen = await waitFor(
    `${proc.name} to listen on ${port}`,
    async () => {
      if (!proc.running()) return 'exited'
      return new Promise<'open' | 'refused'>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => (socket.destroy(), resolve('open')))
        socket.on('error', () => resolve('refused'))
      })
    },
    { until: (state) => state !== 'refused' },
  )
  if (seen === 'exited') throw new Error(`${proc.name} exited before it listened on ${port}`)
}

export interface Proxy {
  url: string
  output(): string
  stop(): Promise<void>
}

async function run(command: string, args: string[], env: NodeJS.ProcessEnv, port: number, dir: string): Promise<Proxy> {
  const proc = spawnProcess(command, args, { name: command, env })
  const stop = async () => {
    await proc.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  try {
    await waitForPort(port, proc)
  } catch (error) {
    await stop()
    throw new Error(`${(error as Error).message}:\n${proc.output()}`)
  }
  return { url: `http://127.0.0.1:${port}`, output: proc.output, stop }
}

/**
 * nginx in the foreground, as any user: `http { … }` holds the shipped `server` block (or
 * `locations`, wrapped in one), with temp paths and logs in a temporary folder. One worker
 * of 256 connections unless `tuning` says otherwise (the bench runs Debian's `auto`);
 * `keepaliveRequests` sets nginx's `keepalive_requests` for the clients' connections.
 */
export async function startNginx(
  config: { server: string } | { locations: string; upstreams: Record<string, string> },
  port: number,
  tuning: { workers?: number | 'auto'; connections?: number; keepaliveRequests?: number } = {},
): Promise<Proxy> {
  const dir = mkdtempSync(join(tmpdir(), 'chat-auth-nginx-'))
  chmodSync(dir, 0o755)
  for (const sub of ['body', 'proxy', 'fastcgi', 'uwsgi', 'scgi']) {
    mkdirSync(join(dir, sub))
    chmodSync(join(dir, sub), 0o777) // workers run as nobody when the tests run as root
  }
  const server =
    'server' in config
      ? config.server
      : `${Object.entries(config.upstreams)
          .map(([name, address]) => `upstream ${name} { server ${address}; }`)
          .join('\n')}\nserver {\n  listen 127.0.0.1:${port};\n${config.locations}\n}\n`
  const keepalive = tuning.keepaliveRequests === undefined ? '' : `\n  keepalive_requests ${tuning.keepaliveRequests};`
  writeFileSync(
    join(dir, 'nginx.conf'),
    `worker_processes ${tuning.workers ?? 1};
events { worker_connections ${tuning.connections ?? 256}; }
http {
  access_log off;${keepalive}
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
${server}
}
`,
  )
  return run(
    locate('nginx')!,
    ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', `daemon off; pid ${dir}/nginx.pid; error_log ${dir}/error.log warn;`],
    process.env,
    port,
    dir,
  )
}

/** Caddy in the foreground with the admin API off and every folder of its own in a temporary one. */
export async function startCaddy(siteBlock: string, port: number): Promise<Proxy> {
  const dir = mkdtempSync(join(tmpdir(), 'chat-auth-caddy-'))
  const file = join(dir, 'Caddyfile')
  writeFileSync(file, `{\n\tadmin off\n\tauto_https off\n}\n\n${siteBlock}`)
  const env = { ...process.env, HOME: dir, XDG_DATA_HOME: join(dir, 'data'), XDG_CONFIG_HOME: join(dir, 'config') }
  return run(locate('caddy')!, ['run', '--config', file, '--adapter', 'caddyfile'], env, port, dir)
}

/**
 * A TCP relay the test can cut (to PostgreSQL: the gateway behind it then cannot read its
 * store) and whose accepted connections it counts (to the gateway: does a proxy reuse them).
 */
export async function startRelay(target = { host: '127.0.0.1', port: 5432 }): Promise<{ port: number; cut(): void; connections(): number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>()
  let cut = false
  let connections = 0
  const server = net.createServer((client) => {
    connections++
    if (cut) return void client.destroy()
    const upstream = net.connect(target.port, target.host)
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.on('close', () => sockets.delete(socket))
      socket.on('error', () => {})
    }
    client.pipe(upstream).pipe(client)
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const cutAll = () => {
    cut = true
    for (const socket of sockets) socket.destroy()
  }
  return {
    port: (server.address() as net.AddressInfo).port,
    cut: cutAll,
    connections: () => connections,
    async close() {
      cutAll()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
