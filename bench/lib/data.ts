import { randomBytes, randomUUID } from 'node:crypto'
import type { Db } from '../../src/store/db.js'
import { migrate } from '../../src/store/migrate.js'
import { createStore } from '../../src/store/store.js'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { createKeyring, type Keyring } from '../../src/jwt/keyring.js'

/**
 * The per-company new-user limits (SPEC §7.3) lifted to their maxima: the bench makes its
 * users through the API, and issue-new creates thousands a second, in its one company.
 */
export const BENCH_NEW_USER_LIMITS = { NEW_USERS_BURST: '100000000', NEW_USERS_PER_MINUTE: '100000000', MAX_USERS_PER_COMPANY: '1000000000' }

/**
 * Users are laid out by index:
 *   [0, mixed)                   the mixed scenario's users (each with a stale and a current token)
 *   [mixed, mixed + invalidate)  invalidated over and over by `invalidate` (no tokens needed)
 *   [mixed + invalidate, users)  never change: `verify-cold` draws from all of them,
 *                                `verify-hot` and `issue-existing` from the first `hot`.
 */
export interface Layout {
  users: number
  mixed: number
  invalidate: number
  hot: number
}

export interface Dataset {
  path: 'api' | 'sql'
  companyId: string
  agentId: string
  keyId: string
  keySecret: string
  layout: Layout
  userId(i: number): string
  externalId(i: number): string
  /** a token that must be accepted, for i ≥ mixed + invalidate */
  token(i: number): string
  /**
   * mixed users: the version the store holds, the newest token, and an older (revoked) one;
   * `uncertain`: an invalidation was sent but its answer never came back (a run ended with
   * it in flight), so the version is unknown until the next answer about that user.
   */
  mixed: { version: number[]; current: string[]; stale: Array<string | undefined>; uncertain?: boolean[] }
}

export function stableStart(layout: Layout): number {
  return layout.mixed + layout.invalidate
}

export function layoutFor(users: number, hot: number, mixed = 2000, invalidate = 2000): Layout {
  const m = Math.min(mixed, Math.floor(users / 10))
  const inv = Math.min(invalidate, Math.floor(users / 10))
  const h = Math.min(hot, users - m - inv)
  return { users, mixed: m, invalidate: inv, hot: h }
}

export function tokenVersionOf(token: string): number {
  const payload = token.slice(token.indexOf('.') + 1, token.lastIndexOf('.'))
  return (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { tokenVersion: number }).tokenVersion
}

export function hs256Keyring(secret: string): Keyring {
  return createKeyring({ keys: [{ alg: 'HS256', secret }], issuer: undefined, audience: undefined, clockToleranceSeconds: 0 }, [{ alg: 'HS256', secret }])
}

// ── SQL path: rows written straight into the store, tokens signed here with the node's secret ──

/** 24 hex chars of a UUID shared by the run; the last 12 are the user's index. */
function idPrefix(): string {
  const h = randomBytes(12).toString('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-`
}

export interface SqlPrepared {
  companyId: string
  agentId: string
  keyId: string
  keySecret: string
  prefix: string
}

/**
 * Migrates `db` and writes a company, its agent, an API key and `layout.users` users with
 * INSERT … SELECT generate_series (the mixed users at token_version 1, the others at 0).
 */
export async function prepareSql(db: Db, layout: Layout, progress: (done: number) => void = () => {}): Promise<SqlPrepared> {
  await migrate(db)
  const store = createStore(db)
  const company = await store.createCompany('bench company')
  const agent = (await store.createAgent(company.id, 'bench agent', true))!
  const key = generateApiKey()
  await store.createApiKey(company.id, key.keyId, key.secretHash, 'bench')
  const prefix = idPrefix()
  await insertUserRange(db, { prefix, companyId: company.id, agentId: agent.id, from: 0, to: layout.users, versionOneBelow: layout.mixed }, progress)
  await db.query('ANALYZE customer_user')
  return { companyId: company.id, agentId: agent.id, keyId: key.keyId, keySecret: key.keySecret, prefix }
}

export async function insertUserRange(
  db: Db,
  r: { prefix: string; companyId: string; agentId: string; from: number; to: number; versionOneBelow: number },
  progress: (done: number) => void = () => {},
): Promise<void> {
  const chunk = 100_000
  for (let start = r.from; start < r.to; start += chunk) {
    const end = Math.min(r.to, start + chunk) - 1
    await db.query(
      `INSERT INTO customer_user (id, company_id, external_id, agent_id, token_version, revision)
       SELECT ($1 || lpad(to_hex(i), 12, '0'))::uuid, $2, 'u' || i, $3,
              CASE WHEN i < $6 THEN 1 ELSE 0 END, CASE WHEN i < $6 THEN 1 ELSE 0 END
       FROM generate_series($4::int, $5::int) AS i`,
      [r.prefix, r.companyId, r.agentId, start, end, r.versionOneBelow],
    )
    progress(end + 1 - r.from)
  }
}

/** `claims`: extra claims of every token, e.g. the company's tokens generation after a revoke. */
export function sqlDataset(prepared: SqlPrepared, layout: Layout, jwtSecret: string, claims: { cgen?: number } = {}): Dataset {
  const keyring = hs256Keyring(jwtSecret)
  const iat = Math.floor(Date.now() / 1000)
  const exp = iat + 7 * 86400
  const userId = (i: number) => prepared.prefix + i.toString(16).padStart(12, '0')
  const sign = (i: number, tokenVersion: number) =>
    keyring.sign({ sub: userId(i), tokenVersion, companyId: prepared.companyId, agentId: prepared.agentId, iat, exp, jti: randomUUID(), ...claims })
  const start = stableStart(layout)
  // the hot set is signed up front; colder tokens are signed when first drawn
  const signed: string[] = []
  for (let i = start; i < start + layout.hot; i++) signed[i] = sign(i, 0)
  const mixed = { version: [] as number[], current: [] as string[], stale: [] as Array<string | undefined> }
  for (let i = 0; i < layout.mixed; i++) {
    mixed.version.push(1)
    mixed.current.push(sign(i, 1))
    mixed.stale.push(sign(i, 0))
  }
  return {
    path: 'sql',
    companyId: prepared.companyId,
    agentId: prepared.agentId,
    keyId: prepared.keyId,
    keySecret: prepared.keySecret,
    layout,
    userId,
    externalId: (i) => 'u' + i,
    token: (i) => signed[i] ?? sign(i, 0),
    mixed,
  }
}

// ── API path: everything through the admin and public endpoints ──

export interface ApiAccess {
  url: string
  adminToken?: string
  keyId?: string
  keySecret?: string
}

async function call(url: string, method: string, path: string, body: unknown, bearer?: string): Promise<{ status: number; json: any }> {
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await fetch(url + path, {
        method,
        headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      const text = await response.text()
      return { status: response.status, json: text ? JSON.parse(text) : undefined }
    } catch (error) {
      if (attempt >= 3) throw error
      await new Promise((r) => setTimeout(r, 100 * (attempt + 1)))
    }
  }
}

async function expectOk(url: string, method: string, path: string, body: unknown, bearer?: string): Promise<any> {
  const { status, json } = await call(url, method, path, body, bearer)
  if (status < 200 || status >= 300) throw new Error(`${method} ${path} answered ${status}: ${JSON.stringify(json)}`)
  return json
}

async function pool<T>(count: number, concurrency: number, work: (i: number) => Promise<T>, progress: (done: number) => void): Promise<T[]> {
  const results: T[] = new Array(count)
  let next = 0
  let done = 0
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        const i = next++
        results[i] = await work(i)
        if (++done % 1000 === 0) progress(done)
      }
    }),
  )
  progress(done)
  return results
}

/**
 * Creates a company, agent and key through the admin API (or uses the given key), then
 * issues one token per user through POST /rest/v1/auth/token; mixed users get a token,
 * an invalidation and a second token, so that they hold a revoked and a current one.
 */
export async function prepareApi(access: ApiAccess, layout: Layout, progress: (what: string, done: number) => void = () => {}): Promise<Dataset> {
  const { url } = access
  let keyId = access.keyId
  let keySecret = access.keySecret
  let companyId: string | undefined
  let agentId: string | undefined
  if (keyId === undefined || keySecret === undefined) {
    if (!access.adminToken) throw new Error('the API path needs an admin token or an API key (--admin-token, or --key-id and --key-secret)')
    const company = await expectOk(url, 'POST', '/admin/v1/companies', { name: 'bench company' }, access.adminToken)
    const agent = await expectOk(url, 'POST', `/admin/v1/companies/${company.id}/agents`, { name: 'bench agent' }, access.adminToken)
    const key = await expectOk(url, 'POST', `/admin/v1/companies/${company.id}/api-keys`, { name: 'bench' }, access.adminToken)
    keyId = key.keyId
    keySecret = key.keySecret
    companyId = company.id
    agentId = agent.id
  }
  const tag = randomBytes(3).toString('hex')
  const externalIds = Array.from({ length: layout.users }, (_, i) => `bench-${tag}-${i}`)
  const issue = (i: number) => expectOk(url, 'POST', '/rest/v1/auth/token', { keyId, keySecret, userId: externalIds[i] })
  const issued = await pool(layout.users, 32, issue, (n) => progress('tokens', n))
  const ids = issued.map((r) => r.user.id as string)
  const tokens = issued.map((r) => r.token as string)
  companyId ??= issued[0]!.user.companyId
  agentId ??= issued[0]!.user.agentId

  const mixed = { version: [] as number[], current: [] as string[], stale: [] as Array<string | undefined> }
  const again = await pool(
    layout.mixed,
    16,
    async (i) => {
      const inv = await expectOk(url, 'POST', '/rest/v1/auth/invalidate-token', { keyId, keySecret, customerUserId: ids[i] })
      const second = await issue(i)
      return { version: inv.newTokenVersion as number, token: second.token as string }
    },
    (n) => progress('mixed', n),
  )
  for (let i = 0; i < layout.mixed; i++) {
    mixed.version.push(again[i]!.version)
    mixed.current.push(again[i]!.token)
    mixed.stale.push(tokens[i])
  }
  return {
    path: 'api',
    companyId: companyId!,
    agentId: agentId!,
    keyId: keyId!,
    keySecret: keySecret!,
    layout,
    userId: (i) => ids[i]!,
    externalId: (i) => externalIds[i]!,
    token: (i) => tokens[i]!,
    mixed,
  }
}

/** Copies users (by id) into another database, for a baseline that must read the same rows. */
export async function copyUsers(db: Db, ds: Dataset, from: number, to: number): Promise<void> {
  await migrate(db)
  await db.query(`INSERT INTO company (id, name) VALUES ($1, 'bench company') ON CONFLICT DO NOTHING`, [ds.companyId])
  await db.query(`INSERT INTO agent (id, company_id, name) VALUES ($1, $2, 'bench agent') ON CONFLICT DO NOTHING`, [ds.agentId, ds.companyId])
  const chunk = 10_000
  for (let s = from; s < to; s += chunk) {
    const ids: string[] = []
    const ext: string[] = []
    for (let i = s; i < Math.min(to, s + chunk); i++) {
      ids.push(ds.userId(i))
      ext.push(ds.externalId(i))
    }
    await db.query(
      `INSERT INTO customer_user (id, company_id, external_id, agent_id)
       SELECT unnest($1::uuid[]), $3, unnest($2::text[]), $4 ON CONFLICT DO NOTHING`,
      [ids, ext, ds.companyId, ds.agentId],
    )
  }
}
