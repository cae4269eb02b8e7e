import { locate } from '../../test/setup/tools.js'
import { readmeCaddyfile, readmeNginxServer, startCaddy, startNginx, type Proxy } from '../../test/system/proxies/support/proxies.js'
import { stableStart, type Dataset } from './data.js'
import { fmtMs, type LoadResult, type RequestSpec, type Slot, type Workload } from './load.js'
import { DIST, freePort, startProcess, type Proc } from './procs.js'
import { errorKindsText, int, median, statusesText, summarizeRuns, type Check, type Section } from './report.js'

/**
 * The `proxy` scenario: the README's nginx and Caddy recipes, run by the real programs in
 * front of the node under test, each beside the same proxy straight to the same backend.
 *
 * The backend is one small Node HTTP server (bench/baselines/chat-backend.ts) behind every
 * path: the proxy's own static answer would be unfair, since `auth_request` cannot answer
 * from the protected location (it must forward, README), so "alone" would skip the backend
 * hop the checked path pays. With one backend the two paths differ by the verify call only.
 */

export interface ProxyPath {
  /** key in the report's results */
  key: string
  label: string
  url: string
  /** judge identities and refusals (a checked path) or only that the backend answered */
  checked: boolean
}

export interface ProxyRig {
  paths: ProxyPath[]
  backend: Proc
  stop(): Promise<void>
}

/** Why the scenario cannot run here, or undefined. */
export function proxiesMissing(): string | undefined {
  const absent = [
    ['nginx', 'nginx-light'],
    ['caddy', 'caddy'],
  ].filter(([tool]) => locate(tool as 'nginx' | 'caddy') === undefined)
  return absent.length ? `not installed: ${absent.map(([tool, pkg]) => `${tool} (Debian package ${pkg})`).join(', ')}` : undefined
}

// Paths of the plain proxying, beside the recipe's /chat/ in the same process.
const PLAIN = '/plain/'

/**
 * Starts the backend, nginx and Caddy with the recipes of `readme` (the repository's by
 * default), both pointed at `gatewayUrl`. The unchecked paths get the usual plain proxying
 * setup (HTTP/1.1 with idle connections kept), whatever the recipe does.
 */
export async function startProxyRig(gatewayUrl: string, readme?: string): Promise<ProxyRig> {
  const backend = await startProcess({ name: 'chat backend', script: DIST + 'bench/baselines/chat-backend.js', env: {}, port: await freePort(), readyPath: '/healthz' })
  const started: Proxy[] = []
  try {
    const addresses = { gateway: new URL(gatewayUrl).host, backend: new URL(backend.url).host }
    const nginxPort = await freePort()
    // The plain location joins the recipe's server (two on one port would clash), with an upstream of its own.
    const plainUpstream = `upstream plain_backend {\n  server ${addresses.backend};\n  keepalive 32;\n}\n`
    const plainLocation = `  location ${PLAIN} {\n    proxy_http_version 1.1;\n    proxy_set_header Connection "";\n    proxy_pass http://plain_backend;\n  }\n`
    const nginxServer = plainUpstream + readmeNginxServer(addresses, nginxPort, readme).replace(/\}\s*$/, `${plainLocation}}\n`)
    // Debian's nginx.conf: a worker per core, 768 connections each. nginx ends a client's
    // connection after keepalive_requests answers (1,000 by default) with `Connection: close`,
    // which the load generator ignores: its next request on that connection then met a reset
    // now and then (ECONNRESET, only on the auth_request path; 10 times as often at 100).
    // A client that honours the header never sees one, so the run keeps its connections.
    started.push(await startNginx({ server: nginxServer }, nginxPort, { workers: 'auto', connections: 768, keepaliveRequests: 1_000_000 }))
    const caddyPort = await freePort()
    const site = `http://127.0.0.1:${caddyPort} {`
    const caddyfile = readmeCaddyfile(addresses, caddyPort, readme).replace(site, `${site}\n\thandle ${PLAIN}* {\n\t\treverse_proxy ${addresses.backend}\n\t}`)
    started.push(await startCaddy(caddyfile, caddyPort))
    const [nginx, caddy] = started as [Proxy, Proxy]
    return {
      backend,
      paths: [
        { key: 'proxy:backend', label: 'backend alone (node:http)', url: backend.url, checked: false },
        { key: 'proxy:nginx', label: 'nginx → backend', url: nginx.url, checked: false },
        { key: 'proxy:nginx-auth', label: 'nginx auth_request (README)', url: nginx.url, checked: true },
        { key: 'proxy:caddy', label: 'Caddy → backend', url: caddy.url, checked: false },
        { key: 'proxy:caddy-auth', label: 'Caddy forward_auth (README)', url: caddy.url, checked: true },
      ],
      async stop() {
        await Promise.allSettled(started.map((proxy) => proxy.stop()))
        await backend.stop()
      },
    }
  } catch (error) {
    await Promise.allSettled(started.map((proxy) => proxy.stop()))
    await backend.stop()
    throw error
  }

}

/**
 * The verify-hot tokens as chat requests. On a checked path the answer is judged: a valid
 * token must reach the backend with its own user id (one request in 10 also sends a forged
 * `x-auth-user-id`, which must not get through); one request in 20 carries a revoked token
 * (a mixed user's older one) or a token with a broken signature, with a forged identity,
 * and must be refused with 401. On a plain path the same requests only need a 200.
 */
export function proxiedChat(ds: Dataset, path: ProxyPath): Workload {
  const start = stableStart(ds.layout)
  const valid = Array.from({ length: ds.layout.hot }, (_, i) => ({ token: ds.token(start + i), userId: ds.userId(start + i) }))
  const revoked = ds.mixed.stale.filter((token): token is string => token !== undefined)
  const broken = valid.slice(0, 100).map(({ token }) => token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA'))
  const url = path.checked ? '/chat/rooms/1' : path.key === 'proxy:backend' ? '/rooms/1' : `${PLAIN}rooms/1`
  const forged = 'EVIL'
  let n = 0
  let shown = 0
  return {
    next(slot: Slot): RequestSpec {
      const i = n++
      if (i % 20 === 19) {
        const pool = (i / 20) % 2 < 1 && revoked.length ? revoked : broken
        slot.expect = 'deny'
        return { method: 'GET', path: url, headers: { authorization: `Bearer ${pool[i % pool.length]}`, 'x-auth-user-id': forged } }
      }
      const { token, userId } = valid[i % valid.length]!
      slot.expect = userId
      return { method: 'GET', path: url, headers: { authorization: `Bearer ${token}`, ...(i % 10 === 3 ? { 'x-auth-user-id': forged } : {}) } }
    },
    check(slot: Slot, status: number, body: string): boolean {
      // A 503 is a refusal, not a wrong answer: the gateway could not decide, or Caddy's
      // guard caught a request Caddy let through without the answer's identity (README);
      // the table counts them.
      const right = !path.checked ? status === 200 : status === 503 || (slot.expect === 'deny' ? status === 401 : status === 200 && body === slot.expect)
      // the first few wrong answers of a run, on stderr: what the proxy did instead
      if (!right && shown++ < 3) process.stderr.write(`  ${path.label}: wrong answer: expected ${path.checked ? slot.expect : 200}, got ${status} ${JSON.stringify(body.slice(0, 200))}\n`)
      return right
    },
  }
}

/** The proxy section of the report: its table (medians over rounds) and its targets. */
export function proxySection(results: Record<string, LoadResult[]>): Section {
  const s = (key: string) => summarizeRuns(results[key])
  const rows: Array<[string, string, string | undefined]> = [
    ['proxy:backend', 'backend alone (node:http)', undefined],
    ['proxy:nginx', 'nginx → backend', undefined],
    ['proxy:nginx-auth', 'nginx auth_request → gateway, backend', 'proxy:nginx'],
    ['proxy:caddy', 'Caddy → backend', undefined],
    ['proxy:caddy-auth', 'Caddy forward_auth → gateway, backend', 'proxy:caddy'],
  ]
  const body = rows.flatMap(([key, name, base]) => {
    const x = s(key)
    if (!x) return []
    const b = base ? s(base) : undefined
    return [[name, int(x.rps), b ? (x.rps / b.rps).toFixed(2) + '×' : '-', fmtMs(x.p50), fmtMs(x.p99), int(x.errors), statusesText(x.non2xx), int(x.wrong)]]
  })
  const checks: Check[] = []
  for (const [auth, alone, name] of [
    ['proxy:nginx-auth', 'proxy:nginx', 'nginx auth_request'],
    ['proxy:caddy-auth', 'proxy:caddy', 'Caddy forward_auth'],
  ] as const) {
    const a = s(auth)
    const b = s(alone)
    if (!a || !b) continue
    const ratio = a.rps / b.rps
    const perRound = median((results[auth] ?? []).map((r, i) => r.rps / (results[alone]?.[i]?.rps ?? NaN)))
    checks.push({
      text:
        `${name} ≥ 0.5 × ${name.split(' ')[0]} alone, 0 wrong: ${ratio.toFixed(2)}× (median of per-round ratios ${perRound.toFixed(2)}×), ` +
        `${int(a.wrong)} wrong of ${int(a.requests)} (1 in 20 a revoked or broken token, 1 in 10 a forged identity header), ${int(a.non2xx['503'] ?? 0)} refused with 503, ${int(a.errors)} errors${errorKindsText(a.errorKinds)}`,
      ok: ratio >= 0.5 && a.wrong === 0 && a.errors === 0,
    })
  }
  return {
    scenario: 'proxy',
    title: 'behind a reverse proxy (the README recipes)',
    tables: [{ headers: ['path', 'req/s', '× same proxy alone', 'p50 ms', 'p99 ms', 'errors', 'non-2xx', 'wrong'], rows: body }],
    checks,
    data: Object.fromEntries(rows.map(([key]) => [key, results[key]])),
  }
}
