/**
 * The typed client (chat-auth-gateway/client), black box against a listening gateway on this
 * pass's store: every call of SPEC §3 and §4, errors as ChatAuthError with the gateway's
 * statusCode, code and message, and what it retries.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { ChatAuthClient, ChatAuthError, CLIENT_CODES } from '../../../src/client/index.js'
import { ADMIN_TOKEN, ISO_RE, randomUUID, startApp, UUID_RE } from '../../support/helpers.js'
import { freePort } from '../../support/ports.js'
import { waitFor } from '../../support/poll.js'

const node = await startApp(t)
const baseUrl = await node.app.listen({ port: 0, host: '127.0.0.1' })
const admin = new ChatAuthClient({ baseUrl, adminToken: ADMIN_TOKEN }).admin

/** The rejection of `promise`, which must be a ChatAuthError. */
async function failure(promise: Promise<unknown>): Promise<ChatAuthError> {
  const error = await promise.then(
    () => undefined,
    (error: unknown) => error,
  )
  if (!(error instanceof ChatAuthError)) throw new Error(`expected a ChatAuthError, got ${String(error)}`)
  return error
}

/** A verify answer as the API reference gives it, for the hand-made gateways below. */
const IDENTITY = {
  user: { id: randomUUID(), externalId: 'user-42', companyId: randomUUID(), agentId: randomUUID() },
  agent: { id: randomUUID(), name: 'Support bot', active: true },
  tokenVersion: 0,
  expiresAt: '2030-01-01T00:00:00.000Z',
}

async function tenant(name: string) {
  const company = await admin.createCompany({ name })
  const agent = await admin.createAgent(company.id, { name: `${name} agent` })
  const key = await admin.createApiKey(company.id, { name: 'backend' })
  const client = new ChatAuthClient({ baseUrl, apiKey: { keyId: key.keyId, keySecret: key.keySecret } })
  return { company, agent, key, client }
}

t.test('issueToken, verify, invalidate: the walk through of the README', async (t) => {
  const { company, agent, client } = await tenant('Walk')
  const issued = await client.issueToken({ userId: 'user-42', expiresIn: '1h' })
  t.match(issued, { user: { externalId: 'user-42', companyId: company.id, agentId: agent.id }, agent: { id: agent.id, active: true } })
  t.match(issued.expiresAt, ISO_RE)
  const verified = await client.verify(issued.token)
  t.same(verified.user, issued.user)
  t.equal(verified.tokenVersion, 0)

  const invalidated = await client.invalidate(issued.user.id)
  t.same(invalidated, { message: 'All tokens invalidated successfully', customerUserId: issued.user.id, newTokenVersion: 1 })

  const refused = await failure(client.verify(issued.token))
  t.equal(refused.statusCode, 401)
  t.equal(refused.code, 'TOKEN_REVOKED')
  t.equal(refused.message, 'Token has been revoked')
  t.ok(refused instanceof Error)
  t.same(JSON.parse(JSON.stringify(refused)), { statusCode: 401, code: 'TOKEN_REVOKED', message: 'Token has been revoked' }, 'serialises as the error body')
})

t.test('the gateway\'s refusals arrive as typed errors', async (t) => {
  const { client, key } = await tenant('Refusals')
  const wrongKey = new ChatAuthClient({ baseUrl, apiKey: { keyId: key.keyId, keySecret: 'sk_wrong' } })
  t.match(await failure(wrongKey.issueToken({ userId: 'u' })), { statusCode: 401, code: 'INVALID_API_CREDENTIALS', message: 'Invalid API credentials' })
  t.match(await failure(client.invalidate(randomUUID())), { statusCode: 400, code: 'CUSTOMER_USER_NOT_FOUND' })
  t.match(await failure(client.issueToken({ userId: 'u', expiresIn: 'forever' })), { statusCode: 400, code: 'INVALID_EXPIRES_IN' })
  t.match(await failure(client.issueToken({ userId: '' })), { statusCode: 400, code: 'VALIDATION_ERROR' })
  t.match(await failure(client.verify('not-a-jwt')), { statusCode: 401, code: 'INVALID_TOKEN' })
  t.match(await failure(client.verify('')), { statusCode: 401, code: 'MISSING_BEARER_TOKEN' })

  const wrongAdmin = new ChatAuthClient({ baseUrl, adminToken: 'wrong-admin-token-0123456789' }).admin
  t.match(await failure(wrongAdmin.getCompany(randomUUID())), { statusCode: 401, code: 'INVALID_ADMIN_TOKEN', message: 'Invalid admin token' })
  t.match(await failure(admin.getCompany(randomUUID())), { statusCode: 404, code: 'NOT_FOUND', message: 'Company not found' })
  // Ids go into the path encoded: a slash in one is an unknown id, not another route.
  t.match(await failure(admin.getCompany('a/../../companies')), { statusCode: 404, code: 'NOT_FOUND' })

  const noKey = new ChatAuthClient({ baseUrl })
  await t.rejects(noKey.issueToken({ userId: 'u' }), TypeError, 'an API-key call without a key is the caller\'s mistake')
  await t.rejects(noKey.admin.getCompany(randomUUID()), TypeError)
})

t.test('every admin call of SPEC §4', async (t) => {
  const { company, agent, key, client } = await tenant('Admin')
  t.match(company, { id: UUID_RE, name: 'Admin', createdAt: ISO_RE })
  t.same(await admin.getCompany(company.id), { ...company, defaultAgentId: agent.id })
  const second = await admin.createAgent(company.id, { name: 'Night shift', active: false })
  t.match(second, { companyId: company.id, name: 'Night shift', active: false })
  t.equal((await admin.updateCompany(company.id, { name: 'Admin Inc', defaultAgentId: second.id })).defaultAgentId, second.id)
  t.match(await failure(admin.updateCompany(company.id, { defaultAgentId: randomUUID() })), { statusCode: 400, code: 'INVALID_DEFAULT_AGENT' })
  t.equal((await admin.updateAgent(second.id, { active: true, name: 'Day shift' })).name, 'Day shift')
  t.same((await admin.listAgents(company.id)).map((a) => a.name), ['Admin agent', 'Day shift'], 'listAgents: by name')

  const unnamed = await admin.createApiKey(company.id)
  t.equal(unnamed.name, null)
  const keys = await admin.listApiKeys(company.id)
  t.same(keys.map((k) => k.keyId).sort(), [key.keyId, unnamed.keyId].sort())
  t.notOk(JSON.stringify(keys).includes(unnamed.keySecret), 'never a secret in the list')
  const revoked = await admin.revokeApiKey(unnamed.keyId)
  t.match(revoked, { keyId: unnamed.keyId, revokedAt: ISO_RE })
  t.match(await admin.revokeApiKey(unnamed.keyId), { keyId: revoked.keyId, revokedAt: revoked.revokedAt }, 'idempotent: the first revocation time')

  const issued = await client.issueToken({ userId: 'admin-user' })
  const user = await admin.getCustomerUser(issued.user.id)
  t.match(user, { id: issued.user.id, externalId: 'admin-user', tokenVersion: 0, active: true })
  t.equal((await admin.updateCustomerUser(user.id, { active: false })).active, false)
  t.match(await failure(client.verify(issued.token)), { statusCode: 401, code: 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE' }, 'deactivation took effect')
  t.equal((await admin.updateCustomerUser(user.id, { active: true })).active, true)
  await admin.updateAgent(issued.agent.id, { active: false })
  t.match(await failure(client.verify(issued.token)), { statusCode: 401, code: 'AGENT_INACTIVE' })
})

t.test('SPEC §7.1: revokeToken, revokeCompanyTokens, revokeAgentTokens', async (t) => {
  const { company, agent, client } = await tenant('Revocations')
  const phone = await client.issueToken({ userId: 'device-user' })
  const laptop = await client.issueToken({ userId: 'device-user' })
  const revoked = await client.revokeToken(phone.token)
  t.match(revoked, { message: 'Token revoked successfully', jti: /\S/, expiresAt: phone.expiresAt })
  t.match(await failure(client.verify(phone.token)), { statusCode: 401, code: 'TOKEN_REVOKED' }, 'that token is refused')
  t.equal((await client.verify(laptop.token)).user.id, laptop.user.id, 'the user\'s other token is not')
  t.same(await client.revokeToken(phone.token), revoked, 'idempotent')
  const other = await tenant('Other company')
  t.match(await failure(other.client.revokeToken(laptop.token)), { statusCode: 400, code: 'TOKEN_NOT_FOUND', message: 'Token not found or does not belong to your company' })

  const byCompany = await admin.revokeCompanyTokens(company.id)
  t.match(byCompany, { companyId: company.id, revokedAt: ISO_RE })
  t.match(await failure(client.verify(laptop.token)), { statusCode: 401, code: 'TOKEN_REVOKED' }, 'a token issued before the company revoke is refused')
  const after = await client.issueToken({ userId: 'device-user' })
  t.ok(await client.verify(after.token), 'one issued after it is valid')

  const byAgent = await admin.revokeAgentTokens(agent.id)
  t.match(byAgent, { agentId: agent.id, revokedAt: ISO_RE })
  t.match(await failure(client.verify(after.token)), { statusCode: 401, code: 'TOKEN_REVOKED' }, 'the agent revoke reaches it')
  t.ok(await client.verify((await client.issueToken({ userId: 'device-user' })).token), 'and a new one is valid')
  t.match(await failure(admin.revokeCompanyTokens(randomUUID())), { statusCode: 404, code: 'NOT_FOUND' })
  t.match(await failure(admin.revokeAgentTokens('not-a-uuid')), { statusCode: 404, code: 'NOT_FOUND' })
})

t.test('SPEC §9: oauth.introspect and oauth.revoke, with RFC 6749 codes for their refusals', async (t) => {
  const { company, agent, key, client } = await tenant('OAuth')
  const phone = await client.issueToken({ userId: 'oauth-user' })
  const laptop = await client.issueToken({ userId: 'oauth-user' })
  const active = await client.oauth.introspect(phone.token)
  t.match(active, { active: true, sub: phone.user.id, token_type: 'Bearer', client_id: key.keyId, company_id: company.id, agent_id: agent.id, token_version: 0, ext_id: 'oauth-user' })
  t.strictSame(await client.oauth.introspect('not-a-token'), { active: false })

  t.equal(await client.oauth.revoke(phone.token), undefined, 'resolves with nothing')
  t.strictSame(await client.oauth.introspect(phone.token), { active: false }, 'inactive once revoked')
  t.match(await failure(client.verify(phone.token)), { statusCode: 401, code: 'TOKEN_REVOKED' })
  t.equal((await client.oauth.introspect(laptop.token)).active, true, 'the user\'s other token stays active')
  t.equal(await client.oauth.revoke(phone.token), undefined, 'idempotent')
  t.equal(await client.oauth.revoke('not-a-token'), undefined, 'a malformed token resolves too (RFC 7009)')

  const other = await tenant('OAuth other')
  t.strictSame(await other.client.oauth.introspect(laptop.token), { active: false }, 'another company\'s token is inactive')
  t.match(await failure(other.client.oauth.revoke(laptop.token)), { statusCode: 400, code: 'unauthorized_client', message: 'unauthorized_client' })
  const wrong = new ChatAuthClient({ baseUrl, apiKey: { keyId: key.keyId, keySecret: 'sk_wrong' } })
  t.match(await failure(wrong.oauth.introspect(laptop.token)), { statusCode: 401, code: 'invalid_client' })
  t.match(await failure(client.oauth.introspect(42 as unknown as string)), { statusCode: 0, code: CLIENT_CODES.INVALID_ARGUMENT })
  await t.rejects(new ChatAuthClient({ baseUrl }).oauth.introspect(laptop.token), new TypeError('this call needs the client option apiKey: { keyId, keySecret }'))
})

t.test('SPEC §7.2: listEvents pages newest first, and events() walks every page', async (t) => {
  const { company, key, client } = await tenant('Audit')
  const issued = await client.issueToken({ userId: 'audited' })
  await client.invalidate(issued.user.id)
  await admin.updateCustomerUser(issued.user.id, { active: false })
  await admin.revokeCompanyTokens(company.id)

  const all = await admin.listEvents(company.id, { limit: 500 })
  t.equal(all.next, null, 'one page holds them all')
  t.same(
    all.events.map((e) => e.type),
    ['company.tokens_revoked', 'user.deactivated', 'tokens.invalidated', 'api_key.created'],
    'newest first',
  )
  const invalidated = all.events.find((e) => e.type === 'tokens.invalidated')!
  t.same(invalidated.actor, { kind: 'apiKey', keyId: key.keyId })
  t.equal(invalidated.detail.newTokenVersion, 1)
  t.notOk(JSON.stringify(all).includes(key.keySecret), 'no secret in any event')

  const first = await admin.listEvents(company.id, { limit: 1 })
  t.equal(first.events.length, 1)
  t.type(first.next, 'string')
  const second = await admin.listEvents(company.id, { limit: 1, before: first.next! })
  t.same(second.events, [all.events[1]], 'the cursor continues where the page ended')

  const walked = []
  for await (const event of admin.events(company.id, { limit: 1 })) walked.push(event)
  t.same(walked, all.events, 'events() walks every page in order')

  // A live feed polls with `after`: what committed since the cursor, oldest first, and where to go on from.
  t.type(all.cursor, 'string')
  t.same((await admin.listEvents(company.id, { after: all.cursor })).events, [], 'nothing new yet')
  await admin.updateCustomerUser(issued.user.id, { active: true })
  const since = await admin.listEvents(company.id, { after: all.cursor })
  t.same(since.events.map((e) => e.type), ['user.activated'], 'what committed since the cursor')
  t.same((await admin.listEvents(company.id, { after: since.cursor })).events, [], 'and its cursor goes on from there')
  t.match(await failure(admin.listEvents(company.id, { limit: 501 })), { statusCode: 400 })
  t.match(await failure(admin.listEvents(randomUUID())), { statusCode: 404, code: 'NOT_FOUND' })
})

t.test('SPEC §9.3: createWebhook (its secret once), listWebhooks, listWebhookDeliveries, deleteWebhook', async (t) => {
  const { company } = await tenant('Hooked')
  const created = await admin.createWebhook(company.id, { url: 'https://hooks.example.com/in', types: ['token.revoked'] })
  t.match(created, { companyId: company.id, url: 'https://hooks.example.com/in', types: ['token.revoked'], secret: /^whsec_/ })
  t.match(created.id, UUID_RE)
  t.match(created.createdAt, ISO_RE)
  const { secret: _secret, ...listed } = created
  t.same(await admin.listWebhooks(company.id), [listed], 'never the secret')
  t.same(await admin.listWebhookDeliveries(created.id, { limit: 5 }), [])
  t.same(await admin.deleteWebhook(created.id), listed)
  t.match(await failure(admin.deleteWebhook(created.id)), { statusCode: 404, code: 'NOT_FOUND', message: 'Webhook not found' })
  t.match(await failure(admin.createWebhook(company.id, { url: 'ftp://hooks.example.com/' })), { statusCode: 400, code: 'VALIDATION_ERROR' })
  t.match(await failure(admin.listWebhooks(randomUUID())), { statusCode: 404, message: 'Company not found' })
})

t.test('a base URL with a path keeps it (a proxy\'s prefix)', async (t) => {
  const prefixed = new ChatAuthClient({ baseUrl: `${baseUrl}/nothing-here`, adminToken: ADMIN_TOKEN })
  t.match(await failure(prefixed.admin.getCompany(randomUUID())), { statusCode: 404, code: 'ROUTE_NOT_FOUND' })
})

// ── What is retried ─────────────────────────────────────────────────────────
// A failing hop in front of a gateway (a down store answers 503 with Retry-After; a proxy
// 502 with its own page; a dead or stuck one resets or never answers), made with node:http
// so that each attempt can be counted.

interface Hop {
  url: string
  attempts: number
}

async function hop(t: Test, answer: (request: IncomingMessage, response: ServerResponse, attempt: number) => void): Promise<Hop> {
  const state = { url: '', attempts: 0 }
  const server = createServer((request, response) => {
    request.resume()
    answer(request, response, ++state.attempts)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())).then(() => server.closeAllConnections()))
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return state
}

const unavailable = (response: ServerResponse) =>
  response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' }).end(JSON.stringify({ statusCode: 503, message: 'Service temporarily unavailable', code: 'SERVICE_UNAVAILABLE' }))

t.test('safe calls are retried on 503, then answer; unsafe ones are sent once', async (t) => {
  const flaky = await hop(t, (request, response, attempt) => {
    if (attempt % 3 !== 0) return unavailable(response)
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...IDENTITY, tokenVersion: attempt }))
  })
  const client = new ChatAuthClient({ baseUrl: flaky.url, apiKey: { keyId: 'ak_x', keySecret: 'sk_x' }, adminToken: ADMIN_TOKEN, retries: 2, retryDelayMs: 1 })
  t.equal((await client.verify('token')).tokenVersion, 3, 'verify: third attempt answers')
  t.equal(flaky.attempts, 3)
  t.match(await client.admin.getCompany(randomUUID()), { tokenVersion: 6 }, 'an admin read: the same')

  for (const [name, call] of [
    ['issueToken', () => client.issueToken({ userId: 'u' })],
    ['invalidate', () => client.invalidate(randomUUID())],
    ['createCompany', () => client.admin.createCompany({ name: 'x' })],
    ['revokeCompanyTokens', () => client.admin.revokeCompanyTokens(randomUUID())],
    ['revokeAgentTokens', () => client.admin.revokeAgentTokens(randomUUID())],
  ] as const) {
    flaky.attempts = 0
    const error = await failure(call())
    t.match(error, { statusCode: 503, code: 'SERVICE_UNAVAILABLE', retryAfter: 0 }, `${name}: the 503 as it came`)
    t.equal(flaky.attempts, 1, `${name} is sent once`)
  }
})

t.test('retries stop after `retries`; 4xx answers are never retried', async (t) => {
  const down = await hop(t, (_request, response) => unavailable(response))
  const client = new ChatAuthClient({ baseUrl: down.url, adminToken: ADMIN_TOKEN, retries: 3, retryDelayMs: 1 })
  t.match(await failure(client.verify('token')), { statusCode: 503 })
  t.equal(down.attempts, 4, 'one attempt and three retries')

  const refusing = await hop(t, (_request, response) =>
    response.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ statusCode: 401, message: 'Token has been revoked', code: 'TOKEN_REVOKED' })),
  )
  t.match(await failure(new ChatAuthClient({ baseUrl: refusing.url }).verify('token')), { code: 'TOKEN_REVOKED' })
  t.equal(refusing.attempts, 1)
})

t.test('a proxy\'s page is UNEXPECTED_RESPONSE with its status, and retried where safe', async (t) => {
  const proxy = await hop(t, (_request, response) => response.writeHead(502, { 'content-type': 'text/html' }).end('<html>Bad Gateway</html>'))
  const client = new ChatAuthClient({ baseUrl: proxy.url, adminToken: ADMIN_TOKEN, retries: 1, retryDelayMs: 1 })
  t.match(await failure(client.admin.listApiKeys(randomUUID())), { statusCode: 502, code: CLIENT_CODES.UNEXPECTED_RESPONSE })
  t.equal(proxy.attempts, 2)
})

t.test('a reset connection is NETWORK_ERROR (statusCode 0), retried where safe', async (t) => {
  const dying = await hop(t, (request) => request.socket.destroy())
  const client = new ChatAuthClient({ baseUrl: dying.url, apiKey: { keyId: 'ak_x', keySecret: 'sk_x' }, retries: 2, retryDelayMs: 1 })
  t.match(await failure(client.revokeToken('token')), { statusCode: 0, code: CLIENT_CODES.NETWORK_ERROR })
  t.equal(dying.attempts, 3, 'revokeToken is idempotent: retried')
  dying.attempts = 0
  t.match(await failure(client.invalidate(randomUUID())), { statusCode: 0, code: CLIENT_CODES.NETWORK_ERROR })
  t.equal(dying.attempts, 1, 'invalidate is not')

  const closedPort = await freePort()
  const nobody = new ChatAuthClient({ baseUrl: `http://127.0.0.1:${closedPort}`, retries: 0 })
  const refused = await failure(nobody.verify('token'))
  t.match(refused, { statusCode: 0, code: CLIENT_CODES.NETWORK_ERROR })
  t.match(refused.message, `127.0.0.1:${closedPort}`, 'names where it called')
})

t.test('a gateway that never answers: TIMEOUT after timeoutMs per attempt; the caller can abort', async (t) => {
  const stuck = await hop(t, () => {})
  const client = new ChatAuthClient({ baseUrl: stuck.url, adminToken: ADMIN_TOKEN, timeoutMs: 200, retries: 1, retryDelayMs: 1 })
  t.match(await failure(client.verify('token')), { statusCode: 0, code: CLIENT_CODES.TIMEOUT })
  // The client gives up on its second request after 200 ms, which a loaded machine can spend
  // before the server has even parsed it (a CI run saw 1): the request counts once it arrives.
  t.equal(await waitFor('the second attempt to reach the server', () => stuck.attempts, { until: (n) => n >= 2, timeoutMs: 5000 }), 2, 'a timed-out read is tried again')

  const controller = new AbortController()
  const aborted = failure(new ChatAuthClient({ baseUrl: stuck.url, retries: 5 }).verify('token', { signal: controller.signal }))
  controller.abort()
  t.match(await aborted, { statusCode: 0, code: CLIENT_CODES.ABORTED })
})

// ── Bad input, odd answers ──────────────────────────────────────────────────

/** The fields that say what failed, to compare exactly. */
const codeOf = (error: ChatAuthError) => ({ statusCode: error.statusCode, code: error.code })

t.test('bad input from the caller is INVALID_ARGUMENT (statusCode 0): no request is sent, nothing is retried', async (t) => {
  const gateway = await hop(t, (_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(IDENTITY)))
  const client = new ChatAuthClient({ baseUrl: gateway.url, apiKey: { keyId: 'ak_x', keySecret: 'sk_x' }, adminToken: ADMIN_TOKEN, retries: 3, retryDelayMs: 1 })
  // What an end user may hand a backend as "their token": nothing an HTTP header can carry.
  for (const [name, token] of [
    ['a line feed', 'eyJ.a\nb.c'],
    ['CR LF', 'eyJ.a\r\nX-Injected: 1'],
    ['a trailing line feed', 'eyJ.a.b\n'],
    ['a NUL', 'eyJ\0.a.b'],
    ['a character above U+00FF', 'eyJ.€.b'],
    ['an emoji', 'eyJ.😀.b'],
    ['a number', 42 as unknown as string],
    ['undefined', undefined as unknown as string],
  ] as const) {
    const error = await failure(client.verify(token))
    t.same(codeOf(error), { statusCode: 0, code: CLIENT_CODES.INVALID_ARGUMENT }, `verify with ${name}`)
    t.notMatch(error.message, /could not reach/, `${name}: not called a network failure`)
  }
  t.same(codeOf(await failure(client.admin.getCompany('\uD800'))), { statusCode: 0, code: CLIENT_CODES.INVALID_ARGUMENT }, 'an id that is not well-formed text')
  t.same(codeOf(await failure(client.admin.getCustomerUser(7 as unknown as string))), { statusCode: 0, code: CLIENT_CODES.INVALID_ARGUMENT }, 'an id that is not a string')
  t.same(codeOf(await failure(client.issueToken({ userId: 10n as unknown as string }))), { statusCode: 0, code: CLIENT_CODES.INVALID_ARGUMENT }, 'a body JSON cannot carry')
  const looped: Record<string, unknown> = { name: 'loop' }
  looped.self = looped
  t.same(codeOf(await failure(client.admin.createCompany(looped as { name: string }))), { statusCode: 0, code: CLIENT_CODES.INVALID_ARGUMENT }, 'a body that refers to itself')
  t.same(codeOf(await failure(client.verify('token', { signal: 'stop' as unknown as AbortSignal }))), { statusCode: 0, code: CLIENT_CODES.INVALID_ARGUMENT }, 'a signal that is not one')
  t.equal(gateway.attempts, 0, 'not one request was sent')

  // A token the header can carry goes to the gateway, which decides.
  t.same(codeOf(await failure(new ChatAuthClient({ baseUrl }).verify('eyJ.é.b'))), { statusCode: 401, code: 'INVALID_TOKEN' }, 'a Latin-1 token: the real gateway refuses it')
})

t.test('client options are checked at construction: a TypeError naming the option', async (t) => {
  for (const [option, value] of [
    ['baseUrl', 'not a url'],
    ['baseUrl', 'ftp://127.0.0.1/'],
    ['baseUrl', 'http://user:secret@127.0.0.1/'],
    ['baseUrl', undefined],
    ['timeoutMs', NaN],
    ['timeoutMs', -1],
    ['timeoutMs', 0],
    ['timeoutMs', 1.5],
    ['timeoutMs', 2 ** 31],
    ['timeoutMs', '100'],
    ['retries', -1],
    ['retries', NaN],
    ['retries', 0.5],
    ['retries', Infinity],
    ['retryDelayMs', -1],
    ['retryDelayMs', NaN],
    ['retryDelayMs', Infinity],
    ['fetch', 'fetch'],
    ['adminToken', 'admin\ntoken'],
    ['adminToken', 'tökén€'],
    ['adminToken', 12],
    ['apiKey', { keyId: 'ak_x' }],
    ['apiKey', { keyId: 1, keySecret: 'sk_x' }],
    ['apiKey', 'ak_x:sk_x'],
  ] as const) {
    t.throws(
      () => new ChatAuthClient({ baseUrl, [option]: value } as unknown as ConstructorParameters<typeof ChatAuthClient>[0]),
      { name: 'TypeError', message: new RegExp(`client option ${option}\\b`) },
      `${option}: ${typeof value === 'string' ? JSON.stringify(value) : String(value)}`,
    )
  }
  t.doesNotThrow(() => new ChatAuthClient({ baseUrl, timeoutMs: 1, retries: 0, retryDelayMs: 0, adminToken: ADMIN_TOKEN, apiKey: { keyId: 'ak', keySecret: 'sk' } }), 'the smallest settings')
  t.doesNotThrow(() => new ChatAuthClient({ baseUrl: new URL(baseUrl), timeoutMs: 2 ** 31 - 1 }), 'the largest timeout')
})

t.test('verify resolves only with the identity of a 200 answer; anything else is PROTOCOL_ERROR, not retried', async (t) => {
  let answer = { status: 200, body: JSON.stringify(IDENTITY) }
  const gateway = await hop(t, (_request, response) => response.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body))
  const client = new ChatAuthClient({ baseUrl: gateway.url, retries: 2, retryDelayMs: 1 })
  t.same(await client.verify('token'), IDENTITY, 'the identity the API reference gives')
  for (const [name, status, body] of [
    ['null', 200, null],
    ['an empty object', 200, {}],
    ['an array', 200, [IDENTITY]],
    ['true', 200, true],
    ['no agent', 200, { ...IDENTITY, agent: undefined }],
    ['a user without an id', 200, { ...IDENTITY, user: { ...IDENTITY.user, id: undefined } }],
    ['an inactive agent as a string', 200, { ...IDENTITY, agent: { ...IDENTITY.agent, active: 'true' } }],
    ['tokenVersion as a string', 200, { ...IDENTITY, tokenVersion: '0' }],
    ['no expiresAt', 200, { ...IDENTITY, expiresAt: undefined }],
    ['the identity with 201', 201, IDENTITY],
    ['the identity with 204', 204, IDENTITY],
  ] as const) {
    answer = { status, body: status === 204 ? '' : JSON.stringify(body) }
    gateway.attempts = 0
    t.same(codeOf(await failure(client.verify('token'))), { statusCode: status, code: CLIENT_CODES.PROTOCOL_ERROR }, name)
    t.equal(gateway.attempts, 1, `${name}: not retried`)
  }
})

t.test('retries follow the HTTP status, never what the body claims', async (t) => {
  let answer = { status: 500, body: { statusCode: 503, message: 'Service temporarily unavailable', code: 'SERVICE_UNAVAILABLE' } as object }
  const gateway = await hop(t, (_request, response) => response.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body)))
  const client = new ChatAuthClient({ baseUrl: gateway.url, adminToken: ADMIN_TOKEN, retries: 2, retryDelayMs: 1 })
  t.same(codeOf(await failure(client.verify('token'))), { statusCode: 500, code: CLIENT_CODES.UNEXPECTED_RESPONSE }, 'a 500 whose body says 503 is a 500')
  t.equal(gateway.attempts, 1, 'and is not retried')

  answer = { status: 503, body: { statusCode: 400, message: 'Bad request', code: 'VALIDATION_ERROR' } }
  gateway.attempts = 0
  t.same(codeOf(await failure(client.admin.getCompany(randomUUID()))), { statusCode: 503, code: CLIENT_CODES.UNEXPECTED_RESPONSE }, 'a 503 whose body says 400 is a 503')
  t.equal(gateway.attempts, 3, 'and is retried like one')

  answer = { status: 401, body: { statusCode: 401, message: 'Token has been revoked', code: 'TOKEN_REVOKED' } }
  t.same(codeOf(await failure(client.verify('token'))), { statusCode: 401, code: 'TOKEN_REVOKED' }, 'a body that agrees with its status is the gateway\'s')
})
