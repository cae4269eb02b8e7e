/**
 * SPEC §3.3 verification, black box: the 200 answer and its headers, any method and
 * sub-path, each of the seven checks with its message and code (reached with tokens forged
 * with the test's own key), their order, the Authorization header forms, clock tolerance.
 */
import { createHmac } from 'node:crypto'
import t, { type Test } from 'tap'
import type { LightMyRequestResponse } from 'fastify'
import {
  hs256Kid,
  createTenant,
  decodeToken,
  errorBody,
  forgeHs256,
  invalidate,
  issueToken,
  JWT_SECRET,
  leakedLogLines,
  nowSeconds,
  randomUUID,
  serverErrorCounts,
  startApp,
  verify,
  type Tenant,
  type TestApp,
} from '../../support/helpers.js'
import {
  AGENT_INACTIVE,
  INVALID_TOKEN as INVALID,
  MISSING_BEARER_TOKEN as MISSING,
  TOKEN_COMPANY_MISMATCH as COMPANY_MISMATCH,
  TOKEN_EXPIRED as EXPIRED,
  TOKEN_REVOKED as REVOKED,
  USER_NOT_FOUND_OR_INACTIVE as USER_NOT_FOUND,
} from '../../support/spec-bodies.js'

const VERIFY_URL = '/rest/v1/auth/verify'
const OTHER_SECRET = 'another-jwt-secret-of-at-least-32-bytes-retired!!'
const kidOf = hs256Kid
const KID = kidOf(JWT_SECRET)

const node = await startApp(t)
const tenant = (name = 'Acme'): Promise<Tenant> => createTenant(node, name)

type Issued = Awaited<ReturnType<typeof issueToken>>

/** The token's claims changed by `patch` (undefined deletes a claim), signed with the node's key. */
function reforge(token: string, patch: Record<string, unknown>, options: { header?: Record<string, unknown>; secret?: string } = {}): string {
  const { header, payload } = decodeToken(token)
  const claims: Record<string, unknown> = { ...payload, ...patch }
  for (const [name, value] of Object.entries(patch)) if (value === undefined) delete claims[name]
  return forgeHs256(options.header ?? header, claims, options.secret)
}

const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url')
const hmac = (algorithm: string, input: string, secret = JWT_SECRET) => createHmac(algorithm, secret).update(input).digest('base64url')

function assertDenied(t: Test, response: LightMyRequestResponse, expected: ReturnType<typeof errorBody>, label = '') {
  t.equal(response.statusCode, 401, label)
  t.strictSame(response.json(), expected, label)
  t.equal(response.headers['www-authenticate'], 'Bearer error="invalid_token"', label)
}

function assertAllowed(t: Test, response: LightMyRequestResponse, issued: Issued, label = '') {
  t.equal(response.statusCode, 200, label)
  t.equal(response.headers['x-auth-user-id'], issued.user.id, label)
  t.equal(response.headers['x-auth-company-id'], issued.user.companyId, label)
  t.equal(response.headers['x-auth-agent-id'], issued.user.agentId, label)
}

function withAuthorization(target: TestApp, authorization: string, url = VERIFY_URL) {
  return target.inject({ method: 'GET', url, headers: { authorization } })
}

t.test('a good token: 200 with the identity body and the x-auth headers', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-1')
  const response = await verify(node, issued.token)
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^application\/json/)
  t.strictSame(response.json(), {
    user: { id: issued.user.id, externalId: 'user-1', companyId: acme.companyId, agentId: acme.agentId },
    agent: { id: acme.agentId, name: acme.agentName, active: true },
    tokenVersion: 0,
    expiresAt: issued.expiresAt,
  })
  t.equal(response.headers['x-auth-user-id'], issued.user.id)
  t.equal(response.headers['x-auth-external-id'], 'user-1')
  t.equal(response.headers['x-auth-company-id'], acme.companyId)
  t.equal(response.headers['x-auth-agent-id'], acme.agentId)
  t.equal(response.headers['cache-control'], 'no-store', 'a verdict is never cached by a proxy')
  t.equal(response.headers['www-authenticate'], undefined)
})

t.test('any method, any body, any sub-path: the token alone decides', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-2')
  const good = { authorization: `Bearer ${issued.token}` }
  const bad = { authorization: `Bearer ${issued.token}x` }
  const requests: Array<{ label: string; method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS'; url: string; headers?: Record<string, string>; payload?: string }> = [
    { label: 'GET', method: 'GET', url: VERIFY_URL },
    { label: 'GET with a trailing slash', method: 'GET', url: `${VERIFY_URL}/` },
    { label: 'GET a deep sub-path with a query', method: 'GET', url: `${VERIFY_URL}/chat/rooms/42/messages?since=1&x=%zz` },
    { label: 'GET a double slash', method: 'GET', url: `${VERIFY_URL}//x` },
    { label: 'GET a 300-character sub-path', method: 'GET', url: `${VERIFY_URL}/${'a'.repeat(300)}` },
    { label: 'POST JSON', method: 'POST', url: VERIFY_URL, headers: { 'content-type': 'application/json' }, payload: '{"message":"hi"}' },
    { label: 'POST malformed JSON', method: 'POST', url: VERIFY_URL, headers: { 'content-type': 'application/json' }, payload: '{"message":' },
    { label: 'POST text/plain', method: 'POST', url: `${VERIFY_URL}/upload`, headers: { 'content-type': 'text/plain' }, payload: 'hello' },
    { label: 'POST a weird content type', method: 'POST', url: VERIFY_URL, headers: { 'content-type': 'application/x-weird; charset=koi8-r' }, payload: '\u0000\u0001binary' },
    { label: 'POST no content type', method: 'POST', url: VERIFY_URL, payload: 'raw body' },
    { label: 'POST a 20 KiB body', method: 'POST', url: VERIFY_URL, headers: { 'content-type': 'application/octet-stream' }, payload: 'x'.repeat(20 * 1024) },
    { label: 'PUT', method: 'PUT', url: `${VERIFY_URL}/a`, headers: { 'content-type': 'application/json' }, payload: '[]' },
    { label: 'PATCH', method: 'PATCH', url: `${VERIFY_URL}/a/b` },
    { label: 'DELETE a deep sub-path', method: 'DELETE', url: `${VERIFY_URL}/a/b/c/d/e/f` },
    { label: 'OPTIONS', method: 'OPTIONS', url: VERIFY_URL },
  ]
  for (const { label, method, url, headers = {}, payload } of requests) {
    const allowed = await node.inject({ method, url, headers: { ...headers, ...good }, ...(payload === undefined ? {} : { payload }) })
    assertAllowed(t, allowed, issued, label)
    t.strictSame(allowed.json().user, issued.user, label)
    assertDenied(t, await node.inject({ method, url, headers: { ...headers, ...bad }, ...(payload === undefined ? {} : { payload }) }), INVALID, label)
    assertDenied(t, await node.inject({ method, url, headers, ...(payload === undefined ? {} : { payload }) }), MISSING, label)
  }

  const head = await verify(node, issued.token, { method: 'HEAD', url: `${VERIFY_URL}/x` })
  assertAllowed(t, head, issued, 'HEAD')
  t.equal(head.body, '', 'HEAD has no body')
  t.equal(head.headers['content-length'], undefined, 'nor the length of one')
  const headDenied = await verify(node, `${issued.token}x`, { method: 'HEAD' })
  t.equal(headDenied.statusCode, 401, 'HEAD denied')
  t.equal(headDenied.headers['www-authenticate'], 'Bearer error="invalid_token"')
  t.equal(headDenied.body, '', 'nor a HEAD denied')
})

t.test('a sub-path that is not valid percent-encoding still answers only 200 or 401', async (t) => {
  // nginx auth_request turns any status but 2xx/401/403 into a 500 (SPEC §3.3).
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-bad-url')
  const allowed = await verify(node, issued.token, { url: `${VERIFY_URL}/%zz` })
  t.equal(allowed.statusCode, 200, `GET ${VERIFY_URL}/%zz with a good token`)
  const denied = await verify(node, undefined, { url: `${VERIFY_URL}/files/%E0%A4%A` })
  t.equal(denied.statusCode, 401, `GET ${VERIFY_URL}/files/%E0%A4%A without a token`)
})

t.test('the Authorization header: Bearer in any case; anything else is a missing token', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-3')
  for (const authorization of [`Bearer ${issued.token}`, `bearer ${issued.token}`, `BEARER ${issued.token}`, `Bearer  ${issued.token}`]) {
    assertAllowed(t, await withAuthorization(node, authorization), issued, authorization.slice(0, 8))
  }
  assertDenied(t, await verify(node, undefined), MISSING, 'no header')
  for (const authorization of ['', 'Bearer', 'Bearer ', 'Bearer    ', 'Basic xyz', `Basic ${issued.token}`, `Token ${issued.token}`, issued.token, `Bearer:${issued.token}`, `Bearer\t${issued.token}`]) {
    assertDenied(t, await withAuthorization(node, authorization), MISSING, JSON.stringify(authorization.slice(0, 12)))
  }
  assertDenied(t, await withAuthorization(node, 'Bearer not-a-jwt'), INVALID, 'Bearer garbage')
  assertDenied(t, await withAuthorization(node, `Bearer ${issued.token} ${issued.token}`), INVALID, 'two tokens')
})

t.test('check 1: anything but an intact token of ours, with a known kid and its algorithm, is an Invalid token', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-4')
  const [h, p, s] = issued.token.split('.') as [string, string, string]
  const { header, payload } = decodeToken(issued.token)
  t.strictSame(header, { alg: 'HS256', typ: 'JWT', kid: KID })
  assertAllowed(t, await verify(node, forgeHs256(header, payload)), issued, 'control: the forger reproduces a good token')

  const flipped = s.slice(0, 10) + (s[10] === 'A' ? 'B' : 'A') + s.slice(11)
  const tamperedPayload = b64({ ...payload, tokenVersion: 1 })
  const huge = reforge(issued.token, { padding: 'p'.repeat(9000) })
  const cases: Array<[string, string]> = [
    ['garbage', 'garbage'],
    ['three empty segments', '..'],
    ['a.b.c', 'a.b.c'],
    ['three dots (4 segments)', `${issued.token}.x`],
    ['a trailing dot', `${issued.token}.`],
    ['no signature', `${h}.${p}.`],
    ['two segments', `${h}.${p}`],
    ['a flipped signature character', `${h}.${p}.${flipped}`],
    ['a tampered payload under the old signature', `${h}.${tamperedPayload}.${s}`],
    ['alg none with the right kid', `${b64({ alg: 'none', typ: 'JWT', kid: KID })}.${p}.`],
    ['alg none with the right kid and the old signature', `${b64({ alg: 'none', typ: 'JWT', kid: KID })}.${p}.${s}`],
    ['alg HS512 with the right kid, signed HS512', (() => { const input = `${b64({ alg: 'HS512', typ: 'JWT', kid: KID })}.${p}`; return `${input}.${hmac('sha512', input)}` })()],
    ['alg hs256 in lower case', forgeHs256({ alg: 'hs256', typ: 'JWT', kid: KID }, payload)],
    ['alg RS256 with the right kid, HMAC-signed', forgeHs256({ alg: 'RS256', typ: 'JWT', kid: KID }, payload)],
    ['no kid', forgeHs256({ alg: 'HS256', typ: 'JWT' }, payload)],
    ['an unknown kid', forgeHs256({ alg: 'HS256', typ: 'JWT', kid: 'hs-unknown' }, payload)],
    ['a numeric kid', forgeHs256({ alg: 'HS256', typ: 'JWT', kid: 1 }, payload)],
    ['a retired key (its own kid and secret)', forgeHs256({ alg: 'HS256', typ: 'JWT', kid: kidOf(OTHER_SECRET) }, payload, OTHER_SECRET)],
    ['the right kid signed with another secret', forgeHs256(header, payload, OTHER_SECRET)],
    ['another kid signed with the right secret', forgeHs256({ ...header, kid: kidOf(OTHER_SECRET) }, payload)],
    ['a header that is not JSON', (() => { const input = `${b64('not json')}.${p}`; return `${input}.${hmac('sha256', input)}` })()],
    ['a header that is a JSON array', (() => { const input = `${b64([header])}.${p}`; return `${input}.${hmac('sha256', input)}` })()],
    ['a payload that is not JSON, signed', (() => { const input = `${h}.${b64('not json')}`; return `${input}.${hmac('sha256', input)}` })()],
    ['a payload that is a JSON number, signed', (() => { const input = `${h}.${b64(42)}`; return `${input}.${hmac('sha256', input)}` })()],
    ['a payload that is a JSON array, signed', (() => { const input = `${h}.${b64([payload])}`; return `${input}.${hmac('sha256', input)}` })()],
    ['a huge (9 KB) token signed with the right key', huge],
    ['a token that is only dots', '.'.repeat(100)],
    ['a 100 KB string', 'x'.repeat(100_000)],
  ]
  t.ok(huge.length > 9000, 'the huge token is huge')
  for (const [label, token] of cases) assertDenied(t, await verify(node, token), INVALID, label)
})

t.test('check 1: a signed token without the claims of SPEC §3.1, or with claims of the wrong type, is an Invalid token', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-5')
  const cases: Array<[string, Record<string, unknown>]> = [
    ['no sub', { sub: undefined }],
    ['no tokenVersion', { tokenVersion: undefined }],
    ['no companyId', { companyId: undefined }],
    ['no agentId', { agentId: undefined }],
    ['no exp', { exp: undefined }],
    ['sub a number', { sub: 12345 }],
    ['sub null', { sub: null }],
    ['tokenVersion a string', { tokenVersion: '0' }],
    ['tokenVersion a fraction', { tokenVersion: 0.5 }],
    ['tokenVersion negative', { tokenVersion: -1 }],
    ['tokenVersion null', { tokenVersion: null }],
    ['tokenVersion huge', { tokenVersion: 2 ** 60 }],
    ['companyId a number', { companyId: 1 }],
    ['companyId an array', { companyId: [acme.companyId] }],
    ['agentId null', { agentId: null }],
    ['agentId an object', { agentId: { id: acme.agentId } }],
    ['exp a string', { exp: String(nowSeconds() + 3600) }],
    ['exp null', { exp: null }],
    ['nbf in the future', { nbf: nowSeconds() + 3600 }],
  ]
  for (const [label, patch] of cases) assertDenied(t, await verify(node, reforge(issued.token, patch)), INVALID, label)
})

t.test('check 2: an expired token', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-6')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: nowSeconds() - 3600 })), EXPIRED, 'an hour ago')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: nowSeconds() - 1 })), EXPIRED, 'a second ago, with the default tolerance of 0')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: 0 })), EXPIRED, 'exp 0')
  assertAllowed(t, await verify(node, reforge(issued.token, { exp: nowSeconds() + 5 })), issued, 'five seconds left')
  assertAllowed(t, await verify(node, reforge(issued.token, { iat: undefined, jti: undefined })), issued, 'iat and jti are not needed to verify')
})

t.test('check 3: a user that does not exist or is inactive', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-7')
  assertDenied(t, await verify(node, reforge(issued.token, { sub: randomUUID() })), USER_NOT_FOUND, 'an unknown uuid')
  assertDenied(t, await verify(node, reforge(issued.token, { sub: 'user-7' })), USER_NOT_FOUND, 'the external id, not a uuid')
  assertDenied(t, await verify(node, reforge(issued.token, { sub: '' })), USER_NOT_FOUND, 'an empty sub')

  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })).statusCode, 200)
  assertDenied(t, await verify(node, issued.token), USER_NOT_FOUND, 'deactivated')
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: true })).statusCode, 200)
  assertAllowed(t, await verify(node, issued.token), issued, 'reactivated')
})

t.test('check 4: a tokenVersion other than the user\'s', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-8')
  assertDenied(t, await verify(node, reforge(issued.token, { tokenVersion: 1 })), REVOKED, 'a version from the future')
  t.equal((await invalidate(node, acme, issued.user.id)).statusCode, 200)
  assertDenied(t, await verify(node, issued.token), REVOKED, 'an older version')
  assertAllowed(t, await verify(node, reforge(issued.token, { tokenVersion: 1 })), issued, 'the current version')
})

t.test('check 5: a companyId other than the user\'s company', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const issued = await issueToken(node, acme, 'user-9')
  assertDenied(t, await verify(node, reforge(issued.token, { companyId: other.companyId })), COMPANY_MISMATCH, 'another company')
  assertDenied(t, await verify(node, reforge(issued.token, { companyId: randomUUID() })), COMPANY_MISMATCH, 'an unknown company')
  assertDenied(t, await verify(node, reforge(issued.token, { companyId: acme.companyId.toUpperCase() })), COMPANY_MISMATCH, 'the company id in upper case')
  assertDenied(t, await verify(node, reforge(issued.token, { companyId: other.companyId, agentId: other.agentId })), COMPANY_MISMATCH, 'another company and its agent')
})

t.test('check 6: an agent that is unknown, of another company, or inactive', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const issued = await issueToken(node, acme, 'user-10')
  assertDenied(t, await verify(node, reforge(issued.token, { agentId: other.agentId })), AGENT_INACTIVE, 'an agent of another company')
  assertDenied(t, await verify(node, reforge(issued.token, { agentId: randomUUID() })), AGENT_INACTIVE, 'an unknown agent')
  assertDenied(t, await verify(node, reforge(issued.token, { agentId: 'agent-1' })), AGENT_INACTIVE, 'not a uuid')

  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: false })).statusCode, 200)
  assertDenied(t, await verify(node, issued.token), AGENT_INACTIVE, 'deactivated')
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: true })).statusCode, 200)
  assertAllowed(t, await verify(node, issued.token), issued, 'reactivated')
})

t.test('the checks run in order: the first failure answers', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const issued = await issueToken(node, acme, 'user-11')
  const past = nowSeconds() - 60
  assertDenied(t, await verify(node, reforge(issued.token, { exp: past }, { secret: OTHER_SECRET })), INVALID, 'bad signature and expired')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: past, sub: undefined })), INVALID, 'missing claim and expired')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: past, tokenVersion: 5 })), EXPIRED, 'expired and revoked')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: past, sub: randomUUID() })), EXPIRED, 'expired and unknown user')
  assertDenied(t, await verify(node, reforge(issued.token, { sub: randomUUID(), agentId: other.agentId })), USER_NOT_FOUND, 'unknown user and foreign agent')
  assertDenied(t, await verify(node, reforge(issued.token, { tokenVersion: 5, companyId: other.companyId })), REVOKED, 'revoked and company mismatch')
  assertDenied(t, await verify(node, reforge(issued.token, { companyId: other.companyId, agentId: randomUUID() })), COMPANY_MISMATCH, 'company mismatch and unknown agent')

  t.equal((await invalidate(node, acme, issued.user.id)).statusCode, 200)
  assertDenied(t, await verify(node, issued.token), REVOKED, 'revoked')
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })).statusCode, 200)
  assertDenied(t, await verify(node, issued.token), USER_NOT_FOUND, 'revoked and the user deactivated')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: past })), EXPIRED, 'expired, revoked and the user deactivated')
})

t.test('external ids outside visible ASCII are percent-encoded in x-auth-external-id, and exact in the body', async (t) => {
  const acme = await tenant()
  const cases: Array<[string, string]> = [
    ['plain-ASCII_id.1~', 'plain-ASCII_id.1~'],
    ['user@example.com', 'user@example.com'],
    ['émilie', encodeURIComponent('émilie')],
    ['😀 smile', encodeURIComponent('😀 smile')],
    ['מיכאל-عربي', encodeURIComponent('מיכאל-عربي')],
    ['with space', 'with%20space'],
    ['100%', '100%25'],
    ['%41', '%2541'],
    ['line\nbreak', 'line%0Abreak'],
    ['tab\there', 'tab%09here'],
  ]
  for (const [externalId, header] of cases) {
    const issued = await issueToken(node, acme, externalId)
    t.equal(issued.user.externalId, externalId, `${JSON.stringify(externalId)}: the token answer`)
    const row = (await node.admin('GET', `/admin/v1/customer-users/${issued.user.id}`)).json()
    t.equal(row.externalId, externalId, `${JSON.stringify(externalId)}: the admin answer`)
    const response = await verify(node, issued.token)
    t.equal(response.statusCode, 200, JSON.stringify(externalId))
    t.equal(response.json().user.externalId, externalId, `${JSON.stringify(externalId)}: the verify body`)
    t.equal(response.headers['x-auth-external-id'], header, `${JSON.stringify(externalId)}: the header`)
    t.equal(decodeURIComponent(header) === externalId || header === externalId, true, `${JSON.stringify(externalId)}: the header decodes back`)
  }
})

t.test('with JWT_CLOCK_TOLERANCE=60', async (t) => {
  const tolerant = await startApp(t, { JWT_CLOCK_TOLERANCE: '60' })
  const acme = await createTenant(tolerant)
  const issued = await issueToken(tolerant, acme, 'tolerant-user')
  const expired30 = reforge(issued.token, { exp: nowSeconds() - 30 })
  const response = await verify(tolerant, expired30)
  assertAllowed(t, response, issued, 'expired 30 s ago: within the tolerance')
  t.equal(response.json().expiresAt, new Date((decodeToken(expired30).payload.exp as number) * 1000).toISOString(), 'expiresAt is the token\'s own exp')
  assertDenied(t, await verify(tolerant, reforge(issued.token, { exp: nowSeconds() - 90 })), EXPIRED, 'expired 90 s ago')
  assertDenied(t, await verify(node, reforge(issued.token, { exp: nowSeconds() - 30 })), EXPIRED, 'the default node refuses what this one tolerates')
  t.strictSame(leakedLogLines(tolerant.logs, [OTHER_SECRET]), [], 'no secret in this node\'s log')
})

t.test('no request answered 5xx, and no secret or JWT reached the log', async (t) => {
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs, [OTHER_SECRET]), [])
})
