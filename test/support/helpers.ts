import { createHmac, randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import tap, { type Test } from 'tap'
import { buildApp } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { createLogger } from '../../src/logger.js'
import type { Gateway, GatewayOptions } from '../../src/gateway.js'
import { createKeyring } from '../../src/jwt/keyring.js'
import { createPostgresDb, type Db } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { createStore } from '../../src/store/store.js'
import { ADMIN_TOKEN, JWT_SECRET, NODE_INTERNALS_ENV, STORE, TEST_CACHE_SIZE } from './constants.js'
import { freshPostgresDatabase, type Teardown } from './databases.js'
import { emptyPglite } from './pglite-template.js'

export { ADMIN_TOKEN, JWT_SECRET, STORE, freshPostgresDatabase, type Teardown }

/**
 * `t.test` for a test that does not use this pass's store: it runs once, in the PostgreSQL
 * pass of `npm test`. (Files of nothing but such tests are left out of the PGlite pass by
 * the store matrix, test/setup/passes.ts.)
 */
export function storeIndependentTest(name: string, fn: (t: Test) => Promise<void>): void {
  if (STORE === 'postgres') void tap.test(name, fn)
}

/** The environment of a node process on this run's back end: a new, empty store. */
export async function storeEnv(t: Teardown): Promise<Record<string, string>> {
  return STORE === 'postgres' ? { DATABASE_URL: await freshPostgresDatabase(t) } : { DATA_DIR: 'memory://' }
}

/**
 * A new, migrated store on this run's back end for one test (PGlite: an emptied one, see
 * pglite-template.ts), and the env that names it; released when the test ends.
 */
async function freshDb(t: Teardown): Promise<{ db: Db; env: Record<string, string> }> {
  if (STORE === 'pglite') return { db: await emptyPglite(t), env: { DATA_DIR: 'memory://' } }
  const url = await freshPostgresDatabase(t)
  // In-process test folders keep every file's nodes open until the folder's last test (see
  // suite.ts): a few connections each, closed a second after their last use, keep the pass
  // (three such folders side by side, and the system tests) within PostgreSQL's default 100.
  const db = createPostgresDb(url, { max: 4, idleTimeoutMs: 1000 })
  t.teardown(() => db.close())
  return { db, env: { DATABASE_URL: url } }
}

/** One store that several nodes of a test share. */
export async function sharedDb(t: Teardown): Promise<Db> {
  return (await freshDb(t)).db
}

/** A migrated store on a database of its own, with a company, its agent and one user. */
export async function storeWithUser(t: Teardown, externalId = 'alice') {
  const db = await sharedDb(t)
  await migrate(db)
  const store = createStore(db)
  const company = await store.createCompany('Acme')
  await store.createAgent(company.id, 'bot', true)
  const user = (await store.createUserIfAbsent(company.id, externalId, null))!
  return { db, store, company, user }
}

export interface TestApp {
  app: FastifyInstance
  gateway: Gateway
  config: Config
  /** everything the node logged, for asserting that secrets never appear */
  logs: string[]
  inject(options: InjectOptions): Promise<LightMyRequestResponse>
  /** An admin call with the admin token. */
  admin(method: InjectOptions['method'], url: string, payload?: unknown): Promise<LightMyRequestResponse>
}

/** A node on a fresh store (unless `env` names one), closed when the test ends. */
export async function startApp(t: Teardown, env: Record<string, string> = {}, options: Partial<Omit<GatewayOptions, 'logger'>> = {}): Promise<TestApp> {
  // a store of its own, unless the test names one
  const own = env.DATABASE_URL || env.DATA_DIR || options.db ? undefined : await freshDb(t)
  // A variable given as '' drops this helper's default for it (JWT_SECRET: '' → no secret: keys come from elsewhere, or are generated).
  const merged = { ADMIN_TOKEN, JWT_SECRET, LOG_LEVEL: 'info', SEED_DEMO: 'false', CACHE_SIZE: TEST_CACHE_SIZE, ...NODE_INTERNALS_ENV, ...own?.env, ...env }
  const config = loadConfig(Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== '')))
  const logs: string[] = []
  const logger = createLogger(config, new Writable({ write: (chunk, _enc, done) => (logs.push(String(chunk)), done()) }))
  const { app, gateway } = await buildApp(config, { ...options, ...(own ? { db: own.db } : {}), logger })
  t.teardown(() => app.close())
  return {
    app,
    gateway,
    config,
    logs,
    inject: (options) => app.inject(options),
    admin: async (method, url, payload) => {
      const response = await app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(payload === undefined ? {} : { payload: payload as object }) })
      rememberKeySecret(response.body)
      return response
    },
  }
}

export interface Tenant {
  companyId: string
  agentId: string
  agentName: string
  keyId: string
  keySecret: string
}

/** A company with one (default) agent and one API key, made through the admin API. */
export async function createTenant(node: TestApp, name = 'Acme'): Promise<Tenant> {
  const company = (await node.admin('POST', '/admin/v1/companies', { name })).json()
  const agent = (await node.admin('POST', `/admin/v1/companies/${company.id}/agents`, { name: `${name} agent` })).json()
  const key = (await node.admin('POST', `/admin/v1/companies/${company.id}/api-keys`, { name: 'test' })).json()
  return { companyId: company.id, agentId: agent.id, agentName: agent.name, keyId: key.keyId, keySecret: key.keySecret }
}

export function post(node: TestApp, url: string, payload: unknown, headers: Record<string, string> = {}) {
  return node.inject({ method: 'POST', url, payload: payload as object, headers })
}

export async function issueToken(node: TestApp, tenant: Tenant, userId: string, extra: Record<string, unknown> = {}) {
  const response = await post(node, '/rest/v1/auth/token', { keyId: tenant.keyId, keySecret: tenant.keySecret, userId, ...extra })
  if (response.statusCode !== 200) throw new Error(`token: ${response.statusCode} ${response.body}`)
  return response.json() as { token: string; user: { id: string; externalId: string; companyId: string; agentId: string }; agent: { id: string; name: string; active: boolean }; expiresAt: string }
}

export function invalidate(node: TestApp, tenant: Pick<Tenant, 'keyId' | 'keySecret'>, customerUserId: unknown) {
  return post(node, '/rest/v1/auth/invalidate-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, customerUserId })
}

export function verify(node: TestApp, token: string | undefined, options: { method?: InjectOptions['method']; url?: string } = {}) {
  return node.inject({
    method: options.method ?? 'GET',
    url: options.url ?? '/rest/v1/auth/verify',
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  })
}

/** The kid the service derives for an HS256 secret. */
export function hs256Kid(secret = JWT_SECRET): string {
  return createKeyring({ keys: [], issuer: undefined, audience: undefined, clockToleranceSeconds: 0 }, [{ alg: 'HS256', secret }]).signingKid
}

/** Signs any header and payload with HS256 and `secret`: the test's own forger. */
export function forgeHs256(header: Record<string, unknown>, payload: Record<string, unknown>, secret = JWT_SECRET): string {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
  const input = `${encode(header)}.${encode(payload)}`
  return `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`
}

/** The header and payload of a token, unverified. */
export function decodeToken(token: string): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [header, payload] = token.split('.')
  return { header: JSON.parse(Buffer.from(header!, 'base64url').toString()), payload: JSON.parse(Buffer.from(payload!, 'base64url').toString()) }
}

export const nowSeconds = () => Math.floor(Date.now() / 1000)
export { randomUUID }

// ── helpers of the black-box API suite (test/api) ───────────────────────────
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
export const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

/** The error body of SPEC §3. */
export function errorBody(statusCode: number, message: string, code: string) {
  return { statusCode, message, code }
}

/**
 * Every row of the service's tables, as one comparable string, to prove that a refused
 * request changed nothing. What each use writes is left out (api_key.last_used_at, written in
 * batches; an operator's last use and a console session's last sight), and what the webhook
 * sender writes.
 */
export async function snapshotRows(node: TestApp): Promise<string> {
  const queries = [
    'SELECT * FROM company ORDER BY id',
    'SELECT * FROM agent ORDER BY id',
    'SELECT key_id, company_id, secret_hash, name, created_at, revoked_at FROM api_key ORDER BY key_id',
    'SELECT * FROM customer_user ORDER BY id',
    'SELECT * FROM revoked_token ORDER BY jti',
    // not the lease columns: a node's webhook sender writes them
    'SELECT id, company_id, url, types, secret, created_at FROM webhook ORDER BY id',
    // not the attempts: the sender writes them
    'SELECT id, webhook_id, event_id FROM webhook_delivery ORDER BY id',
    'SELECT id, type, actor, subject FROM event ORDER BY id',
    // not last_used_at nor last_seen_at: each use writes them
    'SELECT id, name, role, token_hash, created_at, revoked_at FROM operator ORDER BY id',
    'SELECT id_hash, operator_id, csrf, created_at, ended_at FROM console_session ORDER BY id_hash',
  ]
  const tables = await Promise.all(queries.map((sql) => node.gateway.db.query<Record<string, unknown>>(sql)))
  return JSON.stringify(tables, (_key, value: unknown) => (value instanceof Uint8Array ? Buffer.from(value).toString('hex') : value))
}

/** How many customer users a company has (there is no admin call that lists them). */
export async function countUsers(node: TestApp, companyId: string): Promise<number> {
  const rows = await node.gateway.db.query<{ n: string | number }>('SELECT count(*) AS n FROM customer_user WHERE company_id = $1', [companyId])
  return Number(rows[0]!.n)
}

/** Every secret this test process handed out: the admin token, the JWT key, each API key secret. */
const handedOut = new Set<string>([ADMIN_TOKEN, JWT_SECRET])

/** Called on every admin answer (and by tests that call the admin API by hand), so that each key secret shown is checked against the logs. */
export function rememberKeySecret(body: string): void {
  const match = /"keySecret":"([^"]+)"/.exec(body)
  if (match) handedOut.add(match[1]!)
}

/** Log lines holding a whole JWT or any secret handed out in this process (and `extra`). */
export function leakedLogLines(logs: string[], extra: string[] = []): string[] {
  // Without a key secret among them the check would prove little: the caller made no key.
  if (handedOut.size <= 2) throw new Error('leakedLogLines: no API key secret was handed out in this test process')
  const secrets = [...handedOut, ...extra]
  const jwt = /eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+/
  return logs.filter((line) => jwt.test(line) || secrets.some((secret) => secret.length > 0 && line.includes(secret)))
}

/** The HTTP status counts of /metrics that are 5xx: a request that answered 500 shows up here. */
export async function serverErrorCounts(node: TestApp): Promise<string[]> {
  const metrics = await node.inject({ method: 'GET', url: '/metrics' })
  return metrics.body.split('\n').filter((line) => line.startsWith('chat_auth_http_requests_total') && /status="5\d\d"/.test(line))
}
