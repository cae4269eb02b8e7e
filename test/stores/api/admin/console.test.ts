/**
 * SPEC §10.3, the console's server side: the sign-in that exchanges a token for a session
 * cookie (its attributes exactly, Secure over HTTPS directly or through a trusted proxy),
 * the anti-CSRF token every write from a session carries, sign-out, idle and absolute
 * expiry, a revoked operator's sessions, guessing limited as on the admin API, the page and
 * its assets with helmet's headers, and CONSOLE=false.
 */
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify from 'fastify'
import t from 'tap'
import { ADMIN_CALLER } from '../../../../src/domain.js'
import { installErrorHandling } from '../../../../src/http/error-handler.js'
import { consoleRoutes } from '../../../../src/routes/console/index.js'
import { createConsoleSessions } from '../../../../src/auth/console-sessions.js'
import { ADMIN_TOKEN, createTenant, errorBody, issueToken, leakedLogLines, snapshotRows, startApp, type TestApp } from '../../../support/helpers.js'
import { sleep } from '../../../support/poll.js'
import { INVALID_ADMIN_TOKEN } from '../../../support/spec-bodies.js'

const CSRF = errorBody(403, 'Missing or wrong CSRF token', 'CSRF')
const FORBIDDEN = errorBody(403, 'Insufficient role', 'FORBIDDEN')
const CSP = "default-src 'self';frame-ancestors 'none';base-uri 'self';form-action 'self';object-src 'none';script-src-attr 'none'"
const COOKIE = /^chat_auth_console=([A-Za-z0-9_-]{43}); Path=\/; HttpOnly; SameSite=Strict$/
const SECURE_COOKIE = /^chat_auth_console=([A-Za-z0-9_-]{43}); Path=\/; HttpOnly; Secure; SameSite=Strict$/

const node = await startApp(t, { TRUST_PROXY: '127.0.0.1' })
const acme = await createTenant(node, 'Console Co')

async function operator(node: TestApp, role: string, name = `the ${role}`) {
  return (await node.admin('POST', '/admin/v1/operators', { name, role })).json() as { id: string; token: string }
}

/** A sign-in: the cookie's value, the whole Set-Cookie header, and the answer. */
async function signIn(node: TestApp, token: string, headers: Record<string, string> = {}) {
  const answer = await node.inject({ method: 'POST', url: '/console/api/session', payload: { token }, headers })
  const setCookie = String(answer.headers['set-cookie'] ?? '')
  return { answer, setCookie, cookie: /^chat_auth_console=([^;]*)/.exec(setCookie)?.[1] ?? '', body: answer.json() as { role: string; name: string; csrf: string } }
}

const withCookie = (node: TestApp, cookie: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = {}) =>
  node.inject({ method, url, cookies: { chat_auth_console: cookie }, headers, ...(payload === undefined ? {} : { payload: payload as object }) })

t.test('sign-in: {role, name, csrf} and a session cookie with exactly HttpOnly, SameSite=Strict, Path=/', async (t) => {
  const op = await operator(node, 'operator', 'Olga')
  const { answer, setCookie, cookie, body } = await signIn(node, op.token)
  t.equal(answer.statusCode, 200)
  t.same(Object.keys(body).sort(), ['csrf', 'name', 'role'])
  t.match(body, { role: 'operator', name: 'Olga', csrf: /^[A-Za-z0-9_-]{43}$/ })
  t.match(setCookie, COOKIE)
  t.notOk(setCookie.includes(op.token), 'the cookie is not the token')
  t.equal(answer.headers['cache-control'], 'no-store')
  const admin = await signIn(node, ADMIN_TOKEN)
  t.strictSame({ role: admin.body.role, name: admin.body.name }, { role: 'admin', name: 'admin' }, 'ADMIN_TOKEN signs in as admin')
  const rows = await node.gateway.db.query<{ id_hash: Uint8Array; csrf: string }>('SELECT id_hash, csrf FROM console_session')
  t.notOk(JSON.stringify(rows).includes(cookie), 'the store holds no session id, only its hash')
})

t.test('Secure over HTTPS: through a proxy TRUST_PROXY names (X-Forwarded-Proto), never on a header from anyone else', async (t) => {
  const op = await operator(node, 'viewer')
  t.match((await signIn(node, op.token, { 'x-forwarded-proto': 'https' })).setCookie, SECURE_COOKIE, 'the trusted proxy said https')
  const untrusted = await node.inject({ method: 'POST', url: '/console/api/session', payload: { token: op.token }, headers: { 'x-forwarded-proto': 'https' }, remoteAddress: '10.1.2.3' })
  t.match(String(untrusted.headers['set-cookie']), COOKIE, 'a client that is no proxy cannot say https')
  const plain = await startApp(t)
  const op2 = await operator(plain, 'viewer')
  t.match((await signIn(plain, op2.token, { 'x-forwarded-proto': 'https' })).setCookie, COOKIE, 'without TRUST_PROXY the header counts for nothing')
})

t.test('the session is the caller of the admin API: reads as they are, writes only with the CSRF token', async (t) => {
  const op = await operator(node, 'operator')
  const { cookie, body } = await signIn(node, op.token)
  const { user } = await issueToken(node, acme, 'csrf-user')
  const read = await withCookie(node, cookie, 'GET', `/admin/v1/customer-users/${user.id}`)
  t.equal(read.statusCode, 200, 'a read needs no CSRF token')
  const before = await snapshotRows(node)
  for (const headers of <Array<Record<string, string>>>[{}, { 'x-csrf-token': 'wrong' }, { 'x-csrf-token': body.csrf.slice(1) }, { 'x-csrf-token': '' }]) {
    const refused = await withCookie(node, cookie, 'POST', `/admin/v1/customer-users/${user.id}/invalidate`, undefined, headers)
    t.equal(refused.statusCode, 403, JSON.stringify(headers))
    t.strictSame(refused.json(), CSRF, JSON.stringify(headers))
  }
  t.equal(await snapshotRows(node), before, 'nothing changed')
  const done = await withCookie(node, cookie, 'POST', `/admin/v1/customer-users/${user.id}/invalidate`, undefined, { 'x-csrf-token': body.csrf })
  t.equal(done.statusCode, 200)
  t.equal(done.json().newTokenVersion, 1)
  const events = (await node.admin('GET', `/admin/v1/companies/${acme.companyId}/events`)).json().events
  t.strictSame(events[0].actor, { kind: 'operator', id: op.id, name: 'the operator' }, 'the event names the operator behind the session')
})

t.test("a viewer's session: reads, and a 403 FORBIDDEN for any write, CSRF token or not", async (t) => {
  const viewer = await operator(node, 'viewer')
  const { cookie, body } = await signIn(node, viewer.token)
  t.equal((await withCookie(node, cookie, 'GET', `/admin/v1/companies/${acme.companyId}`)).statusCode, 200)
  const before = await snapshotRows(node)
  const refused = await withCookie(node, cookie, 'POST', `/admin/v1/companies/${acme.companyId}/revoke-tokens`, undefined, { 'x-csrf-token': body.csrf })
  t.equal(refused.statusCode, 403)
  t.strictSame(refused.json(), FORBIDDEN)
  t.equal(await snapshotRows(node), before)
})

t.test('GET /console/api/session: the live session again; 401 without one', async (t) => {
  const op = await operator(node, 'viewer', 'Vera')
  const { cookie, body } = await signIn(node, op.token)
  const again = await withCookie(node, cookie, 'GET', '/console/api/session')
  t.equal(again.statusCode, 200)
  t.strictSame(again.json(), body)
  t.equal(again.headers['cache-control'], 'no-store')
  for (const value of [undefined, '', 'x'.repeat(43), 'garbage', cookie.slice(1)]) {
    const none = await node.inject({ method: 'GET', url: '/console/api/session', ...(value === undefined ? {} : { cookies: { chat_auth_console: value } }) })
    t.equal(none.statusCode, 401, String(value))
    t.strictSame(none.json(), INVALID_ADMIN_TOKEN, String(value))
    const admin = await node.inject({ method: 'GET', url: '/admin/v1/nodes', ...(value === undefined ? {} : { cookies: { chat_auth_console: value } }) })
    t.equal(admin.statusCode, 401, `admin API: ${String(value)}`)
  }
})

t.test('sign-out needs the CSRF token, ends the session, clears the cookie', async (t) => {
  const op = await operator(node, 'operator')
  const { cookie, body } = await signIn(node, op.token)
  const refused = await withCookie(node, cookie, 'DELETE', '/console/api/session')
  t.equal(refused.statusCode, 403)
  t.strictSame(refused.json(), CSRF)
  t.equal((await withCookie(node, cookie, 'GET', '/console/api/session')).statusCode, 200, 'still signed in')
  const out = await withCookie(node, cookie, 'DELETE', '/console/api/session', undefined, { 'x-csrf-token': body.csrf })
  t.equal(out.statusCode, 204)
  t.equal(out.body, '')
  t.match(String(out.headers['set-cookie']), /^chat_auth_console=; Max-Age=0; Path=\/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Strict$/)
  t.equal((await withCookie(node, cookie, 'GET', '/console/api/session')).statusCode, 401)
  t.equal((await withCookie(node, cookie, 'GET', '/admin/v1/nodes')).statusCode, 401)
  t.equal((await withCookie(node, cookie, 'DELETE', '/console/api/session', undefined, { 'x-csrf-token': body.csrf })).statusCode, 401, 'a second sign-out: no session')
})

t.test("a revoked operator's sessions end at once", async (t) => {
  const op = await operator(node, 'operator')
  const first = await signIn(node, op.token)
  const second = await signIn(node, op.token)
  t.equal((await node.admin('DELETE', `/admin/v1/operators/${op.id}`)).statusCode, 200)
  for (const { cookie } of [first, second]) {
    t.equal((await withCookie(node, cookie, 'GET', '/console/api/session')).statusCode, 401)
    t.equal((await withCookie(node, cookie, 'GET', '/admin/v1/nodes')).statusCode, 401)
  }
  const ended = await node.gateway.db.query<{ n: number | string }>('SELECT count(*) AS n FROM console_session WHERE operator_id = $1 AND ended_at IS NOT NULL', [op.id])
  t.equal(Number(ended[0]!.n), 2, 'both rows ended')
  const again = await signIn(node, op.token)
  t.equal(again.answer.statusCode, 401)
  t.strictSame(again.answer.json(), INVALID_ADMIN_TOKEN)
})

t.test('idle timeout (CONSOLE_SESSION_IDLE) and the absolute 12 h, by the database clock', async (t) => {
  // 3 s idle; uses 1 s apart keep it alive with a 2 s margin, then 5 s unused end it.
  const short = await startApp(t, { CONSOLE_SESSION_IDLE: '3s' })
  const op = await operator(short, 'viewer')
  const { cookie } = await signIn(short, op.token)
  for (let i = 0; i < 4; i++) {
    await sleep(1000)
    t.equal((await withCookie(short, cookie, 'GET', '/console/api/session')).statusCode, 200, `used after ${i + 1} s`)
  }
  await sleep(5000)
  t.equal((await withCookie(short, cookie, 'GET', '/console/api/session')).statusCode, 401, 'unused for 5 s: ended')

  const busy = await signIn(short, op.token)
  await short.gateway.db.query(`UPDATE console_session SET created_at = now() - interval '12 hours 1 second' WHERE operator_id = $1 AND ended_at IS NULL`, [op.id])
  t.equal((await withCookie(short, busy.cookie, 'GET', '/console/api/session')).statusCode, 401, 'past 12 h since sign-in, however recently used')
  const pruned = await short.gateway.housekeeping.runOnce()
  t.ok(pruned.consoleSessions >= 1, 'housekeeping forgets it')
})

t.test('a session opened with ADMIN_TOKEN is not honoured by a node whose ADMIN_TOKEN differs (it was rotated)', async (t) => {
  const opened = createConsoleSessions({ store: node.gateway.store, adminTokenHashMatches: (hash) => node.gateway.adminTokenHashMatches(hash), idleSeconds: 60 })
  const { id } = await opened.open(ADMIN_CALLER, ADMIN_TOKEN)
  t.match(await opened.find(id), { caller: ADMIN_CALLER })
  const rotated = createConsoleSessions({ store: node.gateway.store, adminTokenHashMatches: () => false, idleSeconds: 60 })
  t.equal(await rotated.find(id), undefined)
})

t.test('sign-in guessing is limited like the admin token: 429 past AUTH_FAILURE_LIMIT, even for the right token', async (t) => {
  const limited = await startApp(t, { AUTH_FAILURE_LIMIT: '3' })
  for (const wrong of ['wrong-token-0123456789', 'opt_' + 'B'.repeat(43), 'x']) {
    const answer = await signIn(limited, wrong)
    t.equal(answer.answer.statusCode, 401)
    t.strictSame(answer.answer.json(), INVALID_ADMIN_TOKEN)
    t.equal(answer.setCookie, '', 'no cookie')
  }
  const blocked = await signIn(limited, ADMIN_TOKEN)
  t.equal(blocked.answer.statusCode, 429)
  t.equal(blocked.answer.json().code, 'RATE_LIMITED')
  t.equal(blocked.setCookie, '')
  const bearer = await limited.inject({ method: 'GET', url: '/admin/v1/nodes', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.equal(bearer.statusCode, 429, 'one count for the console and the admin API')
})

t.test('the console\'s pages carry the CSP and helmet\'s headers; /console redirects to /console/', async (t) => {
  for (const url of ['/console/', '/console/users/x', '/console/api/session']) {
    const answer = await node.inject({ method: 'GET', url })
    t.equal(answer.headers['content-security-policy'], CSP, url)
    t.equal(answer.headers['x-frame-options'], 'DENY', url)
    t.equal(answer.headers['x-content-type-options'], 'nosniff', url)
  }
  const bare = await node.inject({ method: 'GET', url: '/console' })
  t.equal(bare.statusCode, 308)
  t.equal(bare.headers.location, '/console/')
  t.notOk((await node.inject({ method: 'GET', url: '/healthz' })).headers['content-security-policy'], 'no other route gets them')
})

t.test('CONSOLE=false: every /console path is a 404, and a session cookie opens nothing', async (t) => {
  const off = await startApp(t, { CONSOLE: 'false' })
  for (const [method, url] of [['GET', '/console'], ['GET', '/console/'], ['GET', '/console/users/1'], ['POST', '/console/api/session'], ['GET', '/console/api/session']] as const) {
    const answer = await off.inject({ method, url, ...(method === 'POST' ? { payload: { token: ADMIN_TOKEN } } : {}) })
    t.equal(answer.statusCode, 404, `${method} ${url}`)
    t.equal(answer.json().code, 'ROUTE_NOT_FOUND', `${method} ${url}`)
  }
  const on = await signIn(node, ADMIN_TOKEN)
  t.equal((await withCookie(off, on.cookie, 'GET', '/admin/v1/nodes')).statusCode, 401)
  t.equal((await off.admin('GET', '/admin/v1/nodes')).statusCode, 200, 'the admin API stays')
})

t.test('the built page: assets as files, every screen the page, a missing asset or API path a 404; unbuilt, a page saying so', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'console-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'index.html'), '<!doctype html><title>console</title><script type="module" src="./app.js"></script>')
  mkdirSync(join(dir, 'assets'))
  writeFileSync(join(dir, 'assets', 'app.js'), 'console.log(1)')
  const serve = async (assetsDir: string) => {
    const fastify = Fastify()
    installErrorHandling(fastify)
    await fastify.register(consoleRoutes, { assetsDir, credentials: { adminToken: async () => ADMIN_CALLER }, sessions: { open: async () => ({ id: 'x', csrf: 'y' }), find: async () => undefined, end: async () => false } })
    t.teardown(() => fastify.close())
    return fastify
  }
  const built = await serve(dir)
  for (const url of ['/console/', '/console/users/3f1c', '/console/companies/a/b?tab=keys']) {
    const page = await built.inject({ method: 'GET', url })
    t.equal(page.statusCode, 200, url)
    t.match(page.headers['content-type'], /^text\/html/, url)
    t.match(page.body, /<title>console<\/title>/, url)
    t.equal(page.headers['content-security-policy'], CSP, url)
  }
  const script = await built.inject({ method: 'GET', url: '/console/assets/app.js' })
  t.equal(script.statusCode, 200)
  t.match(script.headers['content-type'], /javascript/)
  for (const url of ['/console/assets/missing.js', '/console/api/nothing']) {
    const missing = await built.inject({ method: 'GET', url })
    t.equal(missing.statusCode, 404, url)
    t.strictSame(missing.json(), errorBody(404, `Route GET ${url} not found`, 'ROUTE_NOT_FOUND'), url)
  }
  const unbuilt = await serve(join(dir, 'nothing-here'))
  const page = await unbuilt.inject({ method: 'GET', url: '/console/' })
  t.equal(page.statusCode, 200)
  t.match(page.body, /The console was not built/)
  t.notMatch(page.body, /<script|<style|style=/, 'nothing the CSP would refuse')
  t.equal(page.headers['content-security-policy'], CSP)
})

t.test('no token, session id or CSRF token reaches the log', async (t) => {
  const op = await operator(node, 'operator')
  const { cookie, body } = await signIn(node, op.token)
  await withCookie(node, cookie, 'POST', `/admin/v1/companies/${acme.companyId}/revoke-tokens`)
  await withCookie(node, cookie, 'GET', '/admin/v1/no-such-route')
  await signIn(node, `${op.token}x`)
  t.same(leakedLogLines(node.logs, [op.token, cookie, body.csrf]), [])
})
