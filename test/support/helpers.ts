import { createHmac, randomBytes, randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import pg from 'pg'
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { createLogger } from '../../src/logger.js'
import type { Gateway } from '../../src/gateway.js'

/** Which back end this run of the suite uses: `npm test` runs it once for each. */
export const STORE: 'pglite' | 'postgres' = process.env.TEST_STORE === 'postgres' ? 'postgres' : 'pglite'
const ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef'
export const JWT_SECRET = 'test-jwt-secret-that-is-at-least-32-bytes-long!'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** A fresh PostgreSQL database for one test, dropped after it; its URL. */
export async function freshPostgresDatabase(t: Teardown): Promise<string> {
  const name = `chat_auth_test_${process.pid}_${randomBytes(4).toString('hex')}`
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  try {
    await admin.query(`CREATE DATABASE ${name}`)
  } finally {
    await admin.end()
  }
  t.teardown(async () => {
    const dropper = new pg.Client({ connectionString: ADMIN_URL })
    await dropper.connect()
    try {
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    } finally {
      await dropper.end()
    }
  })
  const url = new URL(ADMIN_URL)
  url.pathname = '/' + name
  return url.toString()
}

/** The environment of a node on this run's back end: a new, empty store. */
export async function storeEnv(t: Teardown): Promise<Record<string, string>> {
  return STORE === 'postgres' ? { DATABASE_URL: await freshPostgresDatabase(t) } : { DATA_DIR: 'memory://' }
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
export async function startApp(t: Teardown, env: Record<string, string> = {}): Promise<TestApp> {
  const base = env.DATABASE_URL || env.DATA_DIR ? {} : await storeEnv(t)
  const config = loadConfig({ ADMIN_TOKEN, JWT_SECRET, LOG_LEVEL: 'info', SEED_DEMO: 'false', ...base, ...env })
  const logs: string[] = []
  const logger = createLogger(config, new Writable({ write: (chunk, _enc, done) => (logs.push(String(chunk)), done()) }))
  const { app, gateway } = await buildApp(config, { logger })
  t.teardown(() => app.close())
  return {
    app,
    gateway,
    config,
    logs,
    inject: (options) => app.inject(options),
    admin: (method, url, payload) =>
      app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(payload === undefined ? {} : { payload: payload as object }) }),
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

/** The kid the service derives for an HS256 secret (the same derivation as src/jwt/keyring.ts). */
export { createKeyring } from '../../src/jwt/keyring.js'

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
