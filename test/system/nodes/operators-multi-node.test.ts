import t from 'tap'
import { freshPostgresDatabase } from '../../support/databases.js'
import { admin, call, setupCompany } from '../../support/http-client.js'
import { startGatewayProcess, type GatewayProcess } from '../../support/processes.js'
import { startRedis, type RedisServer } from '../../support/services.js'

/**
 * SPEC §10.1, §10.3 across nodes: two real node processes (`chat-auth serve`) over the real
 * PostgreSQL and a Redis of their own. An operator's token and a console session opened on
 * one node work on the other; revoking the operator, or signing out, on one node refuses
 * them on the other from the moment the call answers — no wait, no cache to expire: every
 * request reads the store. Runs once, in the PostgreSQL pass.
 */
let redis: RedisServer
const nodes: GatewayProcess[] = []

t.teardown(async () => {
  await Promise.allSettled(nodes.map((n) => n.stop()))
  await redis?.stop()
})

const databaseUrl = await freshPostgresDatabase(t)
redis = await startRedis()
const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url }
nodes.push(await startGatewayProcess(env, { name: 'node-a' }))
nodes.push(await startGatewayProcess(env, { name: 'node-b' }))
const [a, b] = nodes.map((n) => n.url) as [string, string]

/** A console sign-in over a real socket: the session cookie as a browser would send it back, and the answer. */
async function signIn(base: string, token: string) {
  const response = await fetch(`${base}/console/api/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) })
  const setCookie = response.headers.get('set-cookie') ?? ''
  return { status: response.status, setCookie, cookie: setCookie.split(';')[0]!, body: (await response.json()) as { role: string; name: string; csrf: string } }
}

const bearer = (base: string, token: string, method: string, path: string, body?: unknown) => call(base, method, path, body, { authorization: `Bearer ${token}` })
const withCookie = (base: string, cookie: string, method: string, path: string, headers: Record<string, string> = {}) => call(base, method, path, undefined, { cookie, ...headers })

t.test("revoking an operator on one node refuses its token and its console sessions on the other at once", async (t) => {
  const company = await setupCompany(a, 'Two Node Co')
  const created = await admin(a, 'POST', '/admin/v1/operators', { name: 'Nina', role: 'operator' })
  t.equal(created.status, 201)
  const { id, token } = created.body as { id: string; token: string }
  t.equal((await bearer(b, token, 'GET', `/admin/v1/companies/${company.companyId}`)).status, 200, 'its token works on the other node')
  const session = await signIn(a, token)
  t.equal(session.status, 200)
  t.match(session.setCookie, /^chat_auth_console=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict$/, 'over plain HTTP: no Secure')
  t.strictSame((await withCookie(b, session.cookie, 'GET', '/console/api/session')).body, session.body, 'the session opened on one node is live on the other')
  const write = await withCookie(b, session.cookie, 'POST', `/admin/v1/companies/${company.companyId}/revoke-tokens`, { 'x-csrf-token': session.body.csrf })
  t.equal(write.status, 200, 'a write from the session, on the other node')
  t.match(write.body.receipt, { outcome: 'acknowledged', nodes: [{ ackedAfterMs: Number }, { ackedAfterMs: Number }] }, 'both nodes acknowledged')

  const revoked = await admin(a, 'DELETE', `/admin/v1/operators/${id}`)
  t.equal(revoked.status, 200)
  const [byToken, bySession, sessionRead] = await Promise.all([
    bearer(b, token, 'GET', `/admin/v1/companies/${company.companyId}`),
    withCookie(b, session.cookie, 'GET', `/admin/v1/companies/${company.companyId}`),
    withCookie(b, session.cookie, 'GET', '/console/api/session'),
  ])
  t.same([byToken.status, bySession.status, sessionRead.status], [401, 401, 401], 'refused on the other node the moment the revocation answered')
  t.same(byToken.body, { statusCode: 401, message: 'Invalid admin token', code: 'INVALID_ADMIN_TOKEN' })
})

t.test('signing out on one node ends the session on the other at once', async (t) => {
  const created = await admin(b, 'POST', '/admin/v1/operators', { name: 'Sam', role: 'viewer' })
  const session = await signIn(b, created.body.token)
  t.equal((await withCookie(a, session.cookie, 'GET', '/admin/v1/nodes')).status, 200)
  const refused = await withCookie(a, session.cookie, 'DELETE', '/console/api/session')
  t.equal(refused.status, 403, 'sign-out needs the CSRF token')
  t.equal((await withCookie(b, session.cookie, 'GET', '/console/api/session')).status, 200, 'still signed in')
  const out = await withCookie(a, session.cookie, 'DELETE', '/console/api/session', { 'x-csrf-token': session.body.csrf })
  t.equal(out.status, 204)
  const [onB, adminOnB] = await Promise.all([withCookie(b, session.cookie, 'GET', '/console/api/session'), withCookie(b, session.cookie, 'GET', '/admin/v1/nodes')])
  t.same([onB.status, adminOnB.status], [401, 401], 'ended on the other node the moment sign-out answered')
  t.equal((await bearer(b, created.body.token, 'GET', '/admin/v1/nodes')).status, 200, 'the operator itself is not revoked: it may sign in again')
})
