/**
 * SPEC §9.1 and §9.2, black box through a listening server: `POST /oauth2/introspect`
 * (RFC 7662) and `POST /oauth2/revoke` (RFC 7009), called by a third-party OAuth client
 * (oauth4webapi, as a resource server or proxy would) with the API key as HTTP Basic and as
 * form fields, and by hand for what no client would send. Every check of §3.3 and every
 * revocation scope of §7.1 makes a token inactive; another company's token is inactive to a
 * key and cannot be revoked by it; bad credentials and bad input get RFC 6749 §5.2 bodies,
 * never a 500 and never a changed row; neither a secret nor a token reaches the log.
 */
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import * as oauth from 'oauth4webapi'
import {
  createTenant,
  decodeToken,
  forgeHs256,
  hs256Kid,
  issueToken,
  leakedLogLines,
  nowSeconds,
  randomUUID,
  serverErrorCounts,
  snapshotRows,
  startApp,
  verify,
  type Tenant,
  type TestApp,
} from '../../support/helpers.js'
import { TOKEN_REVOKED } from '../../support/spec-bodies.js'
import { migratedPglite } from '../../support/pglite-template.js'

const ISSUER = 'https://chat-auth.example'
const AUDIENCE = 'chat-backend'
const INVALID_CLIENT = { error: 'invalid_client' }
const BASIC_CHALLENGE = 'Basic realm="chat-auth"'

async function listen(node: TestApp): Promise<string> {
  await node.app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`
}

// Every call comes from 127.0.0.1: the refusals of this file would add up past the default
// failure limit, which its own test below checks on a node of its own.
const node = await startApp(t, { JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE, AUTH_FAILURE_LIMIT: '1000' })
const base = await listen(node)
const server: oauth.AuthorizationServer = { issuer: base, introspection_endpoint: `${base}/oauth2/introspect`, revocation_endpoint: `${base}/oauth2/revoke` }
const insecure = { [oauth.allowInsecureRequests]: true }

/** The API key as an OAuth client: HTTP Basic (each part form-encoded, as RFC 6749 §2.3.1 says) or form fields. */
type Method = 'basic' | 'post'
const clientOf = (key: Pick<Tenant, 'keyId' | 'keySecret'>, method: Method) => ({
  client: { client_id: key.keyId } satisfies oauth.Client,
  auth: method === 'basic' ? oauth.ClientSecretBasic(key.keySecret) : oauth.ClientSecretPost(key.keySecret),
})

async function introspect(key: Pick<Tenant, 'keyId' | 'keySecret'>, token: string, method: Method = 'basic') {
  const { client, auth } = clientOf(key, method)
  const response = await oauth.introspectionRequest(server, client, auth, token, insecure)
  const raw = response.clone()
  const result = await oauth.processIntrospectionResponse(server, client, response)
  return { result, response: raw, body: (await raw.json()) as Record<string, unknown> }
}

async function revoke(key: Pick<Tenant, 'keyId' | 'keySecret'>, token: string, method: Method = 'basic') {
  const { client, auth } = clientOf(key, method)
  const response = await oauth.revocationRequest(server, client, auth, token, insecure)
  const raw = response.clone()
  await oauth.processRevocationResponse(response)
  return { status: raw.status, body: await raw.text(), headers: raw.headers }
}

/** A request of our own: any body, any headers. */
async function post(path: string, body: string | undefined, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}${path}`, { method: 'POST', headers, body })
  const text = await response.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return { status: response.status, headers: response.headers, text, json }
}

const basicHeader = (keyId: string, keySecret: string) => 'Basic ' + Buffer.from(`${keyId}:${keySecret}`).toString('base64')
const FORM = { 'content-type': 'application/x-www-form-urlencoded' }
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString()
const newTenant = (name = 'Acme') => createTenant(node, `${name} ${randomUUID()}`)

async function eventTypes(companyId: string): Promise<string[]> {
  return (await node.admin('GET', `/admin/v1/companies/${companyId}/events`)).json().events.map((event: { type: string }) => event.type)
}

t.test('introspect: a valid token of the key\'s company is active, with exactly the fields the API reference lists', async (t) => {
  const acme = await newTenant()
  const issued = await issueToken(node, acme, 'alice@example.com')
  const { payload } = decodeToken(issued.token)
  const expected = {
    active: true,
    sub: issued.user.id,
    exp: payload.exp,
    iat: payload.iat,
    jti: payload.jti,
    token_type: 'Bearer',
    client_id: acme.keyId,
    iss: ISSUER,
    aud: AUDIENCE,
    company_id: acme.companyId,
    agent_id: acme.agentId,
    token_version: 0,
    ext_id: 'alice@example.com',
  }
  for (const method of ['basic', 'post'] as const) {
    const { result, response, body } = await introspect(acme, issued.token, method)
    t.equal(response.status, 200, method)
    t.strictSame(body, expected, `${method}: the body`)
    t.equal(result.active, true)
    t.equal(result.sub, issued.user.id)
    t.equal(response.headers.get('cache-control'), 'no-store')
    t.match(response.headers.get('content-type'), /^application\/json/)
  }
  // token_type_hint is accepted and ignored
  const hinted = await post('/oauth2/introspect', form({ token: issued.token, token_type_hint: 'refresh_token' }), { ...FORM, authorization: basicHeader(acme.keyId, acme.keySecret) })
  t.strictSame(hinted.json, expected)
})

t.test('introspect: every check of verification and every scope of revocation makes a token {"active": false}', async (t) => {
  const acme = await newTenant()
  const other = await newTenant('Other')
  const inactive = async (token: string, what: string) => {
    for (const method of ['basic', 'post'] as const) {
      const { result, response, body } = await introspect(acme, token, method)
      t.equal(response.status, 200, `${what} (${method}): 200`)
      t.strictSame(body, { active: false }, `${what} (${method}): {"active": false} and nothing more`)
      t.equal(result.active, false)
      t.equal(response.headers.get('cache-control'), 'no-store')
    }
  }
  const fresh = async (userId: string, extra: Record<string, unknown> = {}) => (await issueToken(node, acme, userId, extra)).token
  const active = async (token: string) => (await introspect(acme, token)).body.active === true

  const sample = await fresh('sample')
  const [header, payload] = sample.split('.')
  await inactive('not-a-jwt', 'a malformed token')
  await inactive(`${header}.${payload}.${'A'.repeat(43)}`, 'a tampered signature')
  await inactive(forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, decodeToken(sample).payload, 'x'.repeat(48)), 'a token signed with another key')
  await inactive(forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...decodeToken(sample).payload, jti: randomUUID(), iat: nowSeconds() - 120, exp: nowSeconds() - 60 }), 'an expired token')
  await inactive('x'.repeat(12_000), 'a token longer than any we sign')

  const invalidated = await issueToken(node, acme, 'invalidated')
  t.ok(await active(invalidated.token), 'control')
  t.equal((await node.inject({ method: 'POST', url: '/rest/v1/auth/invalidate-token', payload: { keyId: acme.keyId, keySecret: acme.keySecret, customerUserId: invalidated.user.id } })).statusCode, 200)
  await inactive(invalidated.token, 'a token of an invalidated user (token_version)')

  const revokedOne = await fresh('revoked-one')
  const sibling = await fresh('revoked-one')
  t.equal((await node.inject({ method: 'POST', url: '/rest/v1/auth/revoke-token', payload: { keyId: acme.keyId, keySecret: acme.keySecret, token: revokedOne } })).statusCode, 200)
  await inactive(revokedOne, 'a token revoked alone (jti)')
  t.ok(await active(sibling), 'the user\'s other token stays active')

  const deactivated = await issueToken(node, acme, 'deactivated')
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${deactivated.user.id}`, { active: false })).statusCode, 200)
  await inactive(deactivated.token, 'a token of an inactive user')

  const bot = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'Bot' })).json()
  const ofBot = await fresh('bot-user', { agentId: bot.id })
  t.ok(await active(ofBot), 'control')
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${bot.id}`, { active: false })).statusCode, 200)
  await inactive(ofBot, 'a token of an inactive agent')
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${bot.id}`, { active: true })).statusCode, 200)
  t.ok(await active(ofBot), 'active again with its agent')
  t.equal((await node.admin('POST', `/admin/v1/agents/${bot.id}/revoke-tokens`)).statusCode, 200)
  await inactive(ofBot, 'a token of an agent whose tokens were revoked')

  const companyWide = await fresh('company-wide')
  t.equal((await node.admin('POST', `/admin/v1/companies/${acme.companyId}/revoke-tokens`)).statusCode, 200)
  await inactive(companyWide, 'a token of a company whose tokens were revoked')
  t.ok(await active(await fresh('company-wide')), 'a token issued after it is active')

  const foreign = await issueToken(node, other, 'someone-else')
  await inactive(foreign.token, 'another company\'s valid token')
  t.equal((await introspect(other, foreign.token)).body.active, true, 'active to its own company')
})

t.test('bad client credentials: 401 {"error":"invalid_client"} with WWW-Authenticate, however they are wrong', async (t) => {
  const acme = await newTenant()
  const issued = await issueToken(node, acme, 'bob')
  const body = form({ token: issued.token })
  const cases: Array<[string, Record<string, string>, string]> = [
    ['no credentials', FORM, body],
    ['a wrong secret as Basic', { ...FORM, authorization: basicHeader(acme.keyId, 'sk_wrong') }, body],
    ['an unknown key as Basic', { ...FORM, authorization: basicHeader('ak_unknown', acme.keySecret) }, body],
    ['not Basic', { ...FORM, authorization: `Bearer ${acme.keySecret}` }, body],
    ['garbled Basic', { ...FORM, authorization: 'Basic !!!' }, body],
    ['a wrong secret as form fields', FORM, form({ token: issued.token, client_id: acme.keyId, client_secret: 'sk_wrong' })],
    ['client_id alone', FORM, form({ token: issued.token, client_id: acme.keyId })],
    ['an over-long client_id', FORM, form({ token: issued.token, client_id: 'a'.repeat(500), client_secret: acme.keySecret })],
  ]
  const before = await snapshotRows(node)
  for (const path of ['/oauth2/introspect', '/oauth2/revoke']) {
    for (const [what, headers, sent] of cases) {
      const answer = await post(path, sent, headers)
      t.equal(answer.status, 401, `${path}, ${what}`)
      t.strictSame(answer.json, INVALID_CLIENT, `${path}, ${what}`)
      t.equal(answer.headers.get('www-authenticate'), BASIC_CHALLENGE, `${path}, ${what}`)
    }
  }
  t.equal(await snapshotRows(node), before, 'nothing changed')
  t.equal((await verify(node, issued.token)).statusCode, 200, 'the token is still valid')

  // The OAuth client sees the challenge, as RFC 6750/7617 clients do.
  const { client } = clientOf(acme, 'basic')
  const refused = await oauth.introspectionRequest(server, client, oauth.ClientSecretBasic('sk_wrong'), issued.token, insecure)
  await t.rejects(oauth.processIntrospectionResponse(server, client, refused), { name: 'WWWAuthenticateChallengeError', status: 401 })
})

t.test('failed client credentials count towards AUTH_FAILURE_LIMIT: past it 429 with Retry-After, per address and per key', async (t) => {
  const limited = await startApp(t, { AUTH_FAILURE_LIMIT: '2', TRUST_PROXY: '127.0.0.1' }, { db: node.gateway.db })
  const limitedBase = await listen(limited)
  const acme = await createTenant(limited, `Limited ${randomUUID()}`)
  const other = await createTenant(limited, `Unrelated ${randomUUID()}`)
  const issued = await issueToken(limited, acme, 'carol')
  const call = (path: string, key: { keyId: string; keySecret: string }, from: string) =>
    fetch(`${limitedBase}${path}`, { method: 'POST', headers: { ...FORM, authorization: basicHeader(key.keyId, key.keySecret), 'x-forwarded-for': from }, body: form({ token: issued.token }) })
  t.equal((await call('/oauth2/introspect', { keyId: acme.keyId, keySecret: 'sk_wrong' }, '10.8.0.1')).status, 401)
  t.equal((await call('/oauth2/revoke', { keyId: acme.keyId, keySecret: 'sk_wrong' }, '10.8.0.2')).status, 401)
  for (const path of ['/oauth2/introspect', '/oauth2/revoke']) {
    const blocked = await call(path, acme, '10.8.0.3')
    t.equal(blocked.status, 429, `${path}: the key guessed at is limited, even with its right secret, from any address`)
    t.strictSame(await blocked.json(), { error: 'invalid_client', error_description: 'Too many failed attempts' })
    t.ok(Number(blocked.headers.get('retry-after')) >= 1, 'Retry-After')
  }
  const unrelated = await fetch(`${limitedBase}/oauth2/introspect`, { method: 'POST', headers: { ...FORM, authorization: basicHeader(other.keyId, other.keySecret), 'x-forwarded-for': '10.8.0.4' }, body: form({ token: issued.token }) })
  t.equal(unrelated.status, 200, 'another key from another address is not limited')
  t.strictSame(await unrelated.json(), { active: false })
  t.equal((await verify(limited, issued.token)).statusCode, 200, 'nothing was revoked')
})

t.test('revoke: 200 with an empty body, the token refused at once, the user\'s other tokens kept, one event', async (t) => {
  const acme = await newTenant()
  for (const method of ['basic', 'post'] as const) {
    const phone = await issueToken(node, acme, `dave-${method}`)
    const laptop = await issueToken(node, acme, `dave-${method}`)
    const answer = await revoke(acme, phone.token, method)
    t.equal(answer.status, 200, method)
    t.equal(answer.body, '', `${method}: an empty body`)
    t.equal(answer.headers.get('cache-control'), 'no-store')
    t.strictSame((await verify(node, phone.token)).json(), TOKEN_REVOKED, `${method}: refused at check 4`)
    t.strictSame((await introspect(acme, phone.token)).body, { active: false })
    t.equal((await verify(node, laptop.token)).statusCode, 200, 'the other device stays logged in')
    const again = await revoke(acme, phone.token, method)
    t.equal(again.status, 200, 'again: idempotent')
  }
  t.strictSame((await eventTypes(acme.companyId)).filter((type) => type === 'token.revoked'), ['token.revoked', 'token.revoked'], 'one token.revoked event per token')
  const events = (await node.admin('GET', `/admin/v1/companies/${acme.companyId}/events`)).json().events
  t.strictSame(events[0].actor, { kind: 'apiKey', keyId: acme.keyId }, 'the key that asked is the actor')
})

t.test('revoke: a malformed, unknown or expired token answers 200 with an empty body, and nothing changes', async (t) => {
  const acme = await newTenant()
  const issued = await issueToken(node, acme, 'erin')
  const { payload } = decodeToken(issued.token)
  const [header, body] = issued.token.split('.')
  const tokens: Array<[string, string]> = [
    ['not a JWT', 'not-a-jwt'],
    ['a tampered signature', `${header}.${body}.${'A'.repeat(43)}`],
    ['signed with another key', forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, payload, 'y'.repeat(48))],
    ['expired', forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...payload, jti: randomUUID(), iat: nowSeconds() - 120, exp: nowSeconds() - 60 })],
    ['longer than any we sign', 'x'.repeat(12_000)],
  ]
  const before = await snapshotRows(node)
  const eventsBefore = await eventTypes(acme.companyId)
  for (const [what, token] of tokens) {
    const answer = await revoke(acme, token)
    t.equal(answer.status, 200, what)
    t.equal(answer.body, '', what)
  }
  t.equal(await snapshotRows(node), before, 'no row changed')
  t.strictSame(await eventTypes(acme.companyId), eventsBefore, 'no event')
  t.equal((await verify(node, issued.token)).statusCode, 200)
})

t.test('revoke: another company\'s valid token is 400 {"error":"unauthorized_client"}, and nothing changes', async (t) => {
  const acme = await newTenant()
  const other = await newTenant('Other')
  const foreign = await issueToken(node, other, 'frank')
  const before = await snapshotRows(node)
  const eventsBefore = [await eventTypes(acme.companyId), await eventTypes(other.companyId)]
  for (const method of ['basic', 'post'] as const) {
    const { client, auth } = clientOf(acme, method)
    const response = await oauth.revocationRequest(server, client, auth, foreign.token, insecure)
    t.equal(response.status, 400)
    t.strictSame(await response.clone().json(), { error: 'unauthorized_client' })
    await t.rejects(oauth.processRevocationResponse(response), { name: 'ResponseBodyError', error: 'unauthorized_client', status: 400 })
  }
  // Another company's token that is no longer valid is no token at all to this key: 200.
  const expired = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...decodeToken(foreign.token).payload, jti: randomUUID(), iat: nowSeconds() - 120, exp: nowSeconds() - 60 })
  const answer = await revoke(acme, expired)
  t.same([answer.status, answer.body], [200, ''], 'another company\'s expired token: 200, empty')
  t.equal(await snapshotRows(node), before, 'no row')
  t.strictSame([await eventTypes(acme.companyId), await eventTypes(other.companyId)], eventsBefore, 'no event')
  t.equal((await verify(node, foreign.token)).statusCode, 200, 'the token is still valid')
})

t.test('bad input: RFC 6749 bodies with the status the API reference gives, never a 500, nothing changed', async (t) => {
  const acme = await newTenant()
  const issued = await issueToken(node, acme, 'grace')
  const auth = { authorization: basicHeader(acme.keyId, acme.keySecret) }
  const invalid = (description: string) => ({ error: 'invalid_request', error_description: description })
  const cases: Array<[string, string | undefined, Record<string, string>, number, unknown]> = [
    ['a JSON body', JSON.stringify({ token: issued.token }), { ...auth, 'content-type': 'application/json' }, 400, invalid('Content-Type must be application/x-www-form-urlencoded')],
    ['text/plain', `token=${issued.token}`, { ...auth, 'content-type': 'text/plain' }, 400, invalid('Content-Type must be application/x-www-form-urlencoded')],
    ['no token', form({ token_type_hint: 'access_token' }), { ...auth, ...FORM }, 400, invalid("body must have required property 'token'")],
    ['an empty token', form({ token: '' }), { ...auth, ...FORM }, 400, invalid('body/token must NOT have fewer than 1 characters')],
    ['an empty form', '', { ...auth, ...FORM }, 400, invalid("body must have required property 'token'")],
    ['no body at all', undefined, auth, 400, invalid('body must be object')],
    ['a repeated token', `token=${issued.token}&token=${issued.token}`, { ...auth, ...FORM }, 400, invalid('parameter repeated: token')],
    ['a repeated client_id', form({ token: issued.token }) + `&client_id=${acme.keyId}&client_id=${acme.keyId}&client_secret=${acme.keySecret}`, FORM, 400, invalid('parameter repeated: client_id')],
    ['HTTP Basic and client_secret', form({ token: issued.token, client_secret: acme.keySecret }), { ...auth, ...FORM }, 400, invalid('more than one client authentication: HTTP Basic and client_secret')],
    ['a client_id that is not the Basic user', form({ token: issued.token, client_id: 'ak_other' }), { ...auth, ...FORM }, 400, invalid('client_id differs from the HTTP Basic user')],
    ['a 100 KiB token', form({ token: 'x'.repeat(100 * 1024) }), { ...auth, ...FORM }, 413, invalid('Request body is too large')],
  ]
  const before = await snapshotRows(node)
  for (const path of ['/oauth2/introspect', '/oauth2/revoke']) {
    for (const [what, sent, headers, status, expected] of cases) {
      const answer = await post(path, sent, headers)
      t.equal(answer.status, status, `${path}, ${what}`)
      t.strictSame(answer.json, expected, `${path}, ${what}`)
      t.equal(answer.headers.get('cache-control'), 'no-store', `${path}, ${what}: no-store`)
    }
  }
  t.equal(await snapshotRows(node), before, 'nothing changed')
  t.equal((await verify(node, issued.token)).statusCode, 200, 'the token is still valid')
  t.strictSame(await serverErrorCounts(node), [], 'no 5xx')

  // A form still reaches only these two endpoints: the JSON ones refuse it as before.
  const token = await post('/rest/v1/auth/token', form({ keyId: acme.keyId, keySecret: acme.keySecret, userId: 'x' }), FORM)
  t.equal(token.status, 415)
})

t.test('neither a client secret nor a token is ever logged', async (t: Test) => {
  const acme = await newTenant()
  const issued = await issueToken(node, acme, 'heidi')
  const wrongSecret = 'sk_wrong_but_a_secret_' + randomUUID()
  const from = node.logs.length
  await introspect(acme, issued.token)
  await introspect(acme, issued.token, 'post')
  await post('/oauth2/introspect', form({ token: issued.token, client_id: acme.keyId, client_secret: wrongSecret }), FORM)
  await post('/oauth2/revoke', form({ token: issued.token }), { ...FORM, authorization: basicHeader(acme.keyId, wrongSecret) })
  await post('/oauth2/revoke', `token=${issued.token}&token=${issued.token}`, { ...FORM, authorization: basicHeader(acme.keyId, acme.keySecret) })
  await revoke(acme, issued.token, 'post')
  const refusal = node.logs.slice(from).map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.code === 'INVALID_API_CREDENTIALS' && line.route === '/oauth2/revoke')
  t.equal(refusal?.keyId, acme.keyId, 'a refusal names the keyId presented as Basic')
  t.strictSame(leakedLogLines(node.logs, [wrongSecret, issued.token]), [])
})

t.test('the API description lists both: a form body, their answers, RFC 6749 error bodies, the API key as Basic', async (t) => {
  type Operation = {
    tags: string[]
    security: unknown
    requestBody: { content: Record<string, { schema: { properties: Record<string, unknown>; required: string[] } }> }
    responses: Record<string, { description: string; content?: Record<string, { schema: { properties: Record<string, unknown>; required?: string[] } }> }>
  }
  const paths = (await node.inject({ method: 'GET', url: '/openapi.json' })).json().paths as Record<string, { post: Operation }>
  for (const path of ['/oauth2/introspect', '/oauth2/revoke']) {
    const operation = paths[path]!.post
    t.strictSame(Object.keys(operation.requestBody.content), ['application/x-www-form-urlencoded'], `${path}: a form`)
    const body = operation.requestBody.content['application/x-www-form-urlencoded']!.schema
    t.strictSame(Object.keys(body.properties).sort(), ['client_id', 'client_secret', 'token', 'token_type_hint'])
    t.strictSame(body.required, ['token'])
    t.strictSame(operation.security, [{ apiKeyBasic: [] }])
    t.strictSame(operation.tags, ['oauth'])
    const errors = path === '/oauth2/revoke' ? ['400', '401', '409', '413', '429', '503'] : ['400', '401', '413', '429', '503']
    t.strictSame(Object.keys(operation.responses).filter((status) => status !== '200').sort(), errors, `${path}: its error statuses, no 415`)
    for (const status of errors) t.strictSame(operation.responses[status]!.content!['application/json']!.schema.required, ['error'], `${path} ${status}: an RFC 6749 body`)
  }
  const introspection = paths['/oauth2/introspect']!.post.responses['200']!.content!['application/json']!.schema
  t.strictSame(Object.keys(introspection.properties).sort(), ['active', 'agent_id', 'aud', 'client_id', 'company_id', 'exp', 'ext_id', 'iat', 'iss', 'jti', 'sub', 'token_type', 'token_version'].sort())
  t.equal(paths['/oauth2/revoke']!.post.responses['200']!.content, undefined, 'revoke answers an empty body')
})

t.test('a revoked API key is invalid_client; a token under a signing key this node lacks cannot be revoked here (503)', async (t) => {
  const acme = await newTenant()
  const issued = await issueToken(node, acme, 'ivan')
  // A kid no key of this node has: mid-rotation, another node may accept the token.
  const unknownKid = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: 'kid-of-another-node' }, decodeToken(issued.token).payload, 'z'.repeat(48))
  const before = await snapshotRows(node)
  const refused = await post('/oauth2/revoke', form({ token: unknownKid }), { ...FORM, authorization: basicHeader(acme.keyId, acme.keySecret) })
  t.equal(refused.status, 503)
  t.strictSame(refused.json, { error: 'temporarily_unavailable', error_description: 'Token is signed with a key this node does not know (a key rotation under way?)' })
  t.equal(refused.headers.get('retry-after'), '5')
  t.strictSame((await introspect(acme, unknownKid)).body, { active: false }, 'inactive to introspection: this node would refuse it')
  t.equal(await snapshotRows(node), before, 'nothing written')

  t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${acme.keyId}`)).statusCode, 200)
  for (const path of ['/oauth2/introspect', '/oauth2/revoke']) {
    const answer = await post(path, form({ token: issued.token }), { ...FORM, authorization: basicHeader(acme.keyId, acme.keySecret) })
    t.equal(answer.status, 401, `${path}: a revoked key`)
    t.strictSame(answer.json, INVALID_CLIENT)
  }
})

t.test('a store that cannot answer: 503 temporarily_unavailable with Retry-After, never "active": true', async (t) => {
  const db = await migratedPglite()
  const away = await startApp(t, { DATA_DIR: 'memory://' }, { db })
  const awayBase = await listen(away)
  const acme = await createTenant(away, 'Away')
  const issued = await issueToken(away, acme, 'judy')
  const call = (path: string, token: string) => fetch(`${awayBase}${path}`, { method: 'POST', headers: { ...FORM, authorization: basicHeader(acme.keyId, acme.keySecret) }, body: form({ token }) })
  t.equal((await call('/oauth2/introspect', issued.token)).status, 200, 'control')
  await db.close()
  // a user no cache holds: its verification must read the store
  const uncached = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...decodeToken(issued.token).payload, sub: randomUUID(), jti: randomUUID() })
  for (const [path, token] of [['/oauth2/introspect', uncached], ['/oauth2/revoke', issued.token]] as const) {
    const answer = await call(path, token)
    t.equal(answer.status, 503, path)
    t.strictSame(await answer.json(), { error: 'temporarily_unavailable', error_description: 'Service temporarily unavailable' }, path)
    t.equal(answer.headers.get('retry-after'), '1', path)
  }
})
