/**
 * Webhooks, black box (SPEC §9.3): the admin endpoints with their exact answers and bad
 * input; every event type delivered to a real HTTP receiver, signed so that the
 * `standardwebhooks` package verifies it; `types`; retries after failures, a timeout, a
 * redirect and a refused connection; a hanging receiver never holding up a write; the
 * deliveries listing; no secret in logs, events or listings.
 */
import t, { type Test } from 'tap'
import { Webhook } from 'standardwebhooks'
import {
  createTenant,
  errorBody,
  invalidate,
  ISO_RE,
  issueToken,
  leakedLogLines,
  post,
  randomUUID,
  serverErrorCounts,
  snapshotRows,
  ADMIN_TOKEN,
  startApp,
  UUID_RE,
  type Tenant,
} from '../../../support/helpers.js'
import { INVALID_ADMIN_TOKEN } from '../../../support/spec-bodies.js'
import { startWebhookReceiver, type WebhookReceiver } from '../../../support/webhook-receiver.js'
import { waitFor } from '../../../support/poll.js'
import { freePort } from '../../../support/ports.js'

// Retries 20 ms apart (doubling) instead of 5 s: the schedule, not the wait, is under test.
// The receivers are on loopback: allowed here (webhook-destinations.test.ts: refused by default).
const node = await startApp(t, { WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8' })
const tenant = (name = 'Acme'): Promise<Tenant> => createTenant(node, name)
const secrets: string[] = []

interface Created {
  id: string
  companyId: string
  url: string
  types: string[] | null
  secret: string
  createdAt: string
}
interface Delivery {
  eventId: string
  eventType: string
  status: string
  attempt: number
  at: string | null
  responseStatus: number | null
  error: string | null
  nextAttemptAt: string | null
}

async function createWebhook(t: Test, companyId: string, receiver: WebhookReceiver | { url: string }, types?: string[]): Promise<Created> {
  const response = await node.admin('POST', `/admin/v1/companies/${companyId}/webhooks`, { url: receiver.url, ...(types ? { types } : {}) })
  if (response.statusCode !== 201) throw new Error(`create webhook: ${response.statusCode} ${response.body}`)
  const created = response.json() as Created
  secrets.push(created.secret)
  if ('secret' in receiver) receiver.secret = created.secret
  return created
}

async function deliveries(webhookId: string): Promise<Delivery[]> {
  const response = await node.admin('GET', `/admin/v1/webhooks/${webhookId}/deliveries`)
  if (response.statusCode !== 200) throw new Error(`deliveries: ${response.statusCode} ${response.body}`)
  return response.json()
}

async function events(companyId: string) {
  return (await node.admin('GET', `/admin/v1/companies/${companyId}/events?limit=500`)).json().events as Array<Record<string, unknown> & { id: string; type: string; subject: Record<string, unknown> }>
}

async function receiver(t: Test): Promise<WebhookReceiver> {
  const started = await startWebhookReceiver()
  t.teardown(() => started.close())
  return started
}

t.test('admin: create (the secret shown once), list, delete, deliveries; exact bodies', async (t) => {
  const acme = await tenant()
  const created = await node.admin('POST', `/admin/v1/companies/${acme.companyId}/webhooks`, { url: 'https://hooks.example.com/chat?x=1', types: ['user.deactivated', 'tokens.invalidated'] })
  t.equal(created.statusCode, 201)
  const body = created.json() as Created
  secrets.push(body.secret)
  t.strictSame(Object.keys(body).sort(), ['companyId', 'createdAt', 'id', 'secret', 'types', 'url'])
  t.match(body.id, UUID_RE)
  t.equal(body.companyId, acme.companyId)
  t.equal(body.url, 'https://hooks.example.com/chat?x=1')
  t.strictSame(body.types, ['user.deactivated', 'tokens.invalidated'])
  t.match(body.createdAt, ISO_RE)
  t.match(body.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'whsec_ and 32 random bytes in base64')

  const all = await node.admin('POST', `/admin/v1/companies/${acme.companyId}/webhooks`, { url: 'http://127.0.0.1:9/all' })
  t.equal(all.statusCode, 201)
  const allBody = all.json() as Created
  secrets.push(allBody.secret)
  t.equal(allBody.types, null, 'no types: every type')
  t.not(allBody.secret, body.secret)

  const listed = await node.admin('GET', `/admin/v1/companies/${acme.companyId}/webhooks`)
  t.equal(listed.statusCode, 200)
  const { secret: _s1, ...first } = body
  const { secret: _s2, ...second } = allBody
  t.strictSame(listed.json(), [first, second], 'oldest first, never the secret')
  t.notMatch(listed.body, /whsec_/)

  t.strictSame((await node.admin('GET', `/admin/v1/companies/${(await tenant('Other')).companyId}/webhooks`)).json(), [], "another company's list is its own")

  t.strictSame(await deliveries(body.id), [], 'nothing sent yet')
  const deleted = await node.admin('DELETE', `/admin/v1/webhooks/${body.id}`)
  t.equal(deleted.statusCode, 200)
  t.strictSame(deleted.json(), first)
  t.strictSame((await node.admin('GET', `/admin/v1/companies/${acme.companyId}/webhooks`)).json(), [second])
  t.strictSame((await node.admin('DELETE', `/admin/v1/webhooks/${body.id}`)).json(), errorBody(404, 'Webhook not found', 'NOT_FOUND'), 'deleted: gone')
  t.strictSame((await node.admin('GET', `/admin/v1/webhooks/${body.id}/deliveries`)).json(), errorBody(404, 'Webhook not found', 'NOT_FOUND'))
  t.strictSame((await node.admin('DELETE', `/admin/v1/webhooks/${allBody.id.toUpperCase()}`)).json(), second, 'an id in upper case is the same id')
})

t.test('admin: unknown ids 404, bad input 400, no admin token 401; nothing created', async (t) => {
  const acme = await tenant()
  const create = (body: unknown, companyId = acme.companyId) => node.admin('POST', `/admin/v1/companies/${companyId}/webhooks`, body)
  const before = await snapshotRows(node)
  const COMPANY_NOT_FOUND = errorBody(404, 'Company not found', 'NOT_FOUND')
  const WEBHOOK_NOT_FOUND = errorBody(404, 'Webhook not found', 'NOT_FOUND')
  for (const companyId of [randomUUID(), 'not-a-uuid']) {
    const created = await create({ url: 'https://example.com/' }, companyId)
    t.equal(created.statusCode, 404)
    t.strictSame(created.json(), COMPANY_NOT_FOUND)
    t.strictSame((await node.admin('GET', `/admin/v1/companies/${companyId}/webhooks`)).json(), COMPANY_NOT_FOUND)
  }
  for (const webhookId of [randomUUID(), 'nope']) {
    t.strictSame((await node.admin('DELETE', `/admin/v1/webhooks/${webhookId}`)).json(), WEBHOOK_NOT_FOUND)
    t.strictSame((await node.admin('GET', `/admin/v1/webhooks/${webhookId}/deliveries`)).json(), WEBHOOK_NOT_FOUND)
  }

  const NOT_HTTP = errorBody(400, 'url must be an absolute http: or https: URL', 'VALIDATION_ERROR')
  for (const url of ['ftp://example.com/', 'javascript:alert(1)', 'file:///etc/passwd', 'not a url', '/relative/path', 'mailto:a@b.c']) {
    const answer = await create({ url })
    t.equal(answer.statusCode, 400, url)
    t.strictSame(answer.json(), NOT_HTTP, url)
  }
  t.strictSame((await create({ url: 'https://user:pass@example.com/' })).json(), errorBody(400, 'url must not carry a user name or password', 'VALIDATION_ERROR'))
  const cases: Array<[string, unknown, string]> = [
    ['no url', {}, "body must have required property 'url'"],
    ['an empty url', { url: '' }, 'body/url must NOT have fewer than 1 characters'],
    ['a url over 2048 characters', { url: `https://example.com/${'a'.repeat(2048)}` }, 'body/url must NOT have more than 2048 characters'],
    ['url not a string', { url: 42 }, 'body/url must be string'],
    ['an unknown type', { url: 'https://example.com/', types: ['user.created'] }, 'types: unknown event type "user.created"'],
    ['no type at all', { url: 'https://example.com/', types: [] }, 'body/types must NOT have fewer than 1 items'],
    ['a type twice', { url: 'https://example.com/', types: ['token.revoked', 'token.revoked'] }, 'body/types must NOT have duplicate items (items ## 1 and 0 are identical)'],
    ['types not an array', { url: 'https://example.com/', types: 'token.revoked' }, 'body/types must be array'],
    ['an unknown field', { url: 'https://example.com/', secret: 'whsec_mine' }, 'body must NOT have additional properties'],
  ]
  for (const [what, body, message] of cases) {
    const answer = await create(body)
    t.equal(answer.statusCode, 400, what)
    t.strictSame(answer.json(), errorBody(400, message, 'VALIDATION_ERROR'), what)
  }
  t.strictSame((await node.admin('GET', `/admin/v1/companies/${acme.companyId}/webhooks`)).json(), [], 'nothing was created')
  t.equal(await snapshotRows(node), before, 'no row changed')
  for (const [what, payload, headers, expected] of [
    ['malformed JSON', '{"url":', { 'content-type': 'application/json' }, errorBody(400, 'Request body is not valid JSON', 'INVALID_JSON')],
    ['not JSON', 'url=https://example.com/', { 'content-type': 'application/x-www-form-urlencoded' }, errorBody(415, 'Content-Type must be application/json', 'UNSUPPORTED_MEDIA_TYPE')],
    ['no body', undefined, {}, errorBody(400, 'body must be object', 'VALIDATION_ERROR')],
  ] as const) {
    const answer = await node.inject({ method: 'POST', url: `/admin/v1/companies/${acme.companyId}/webhooks`, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...headers }, ...(payload === undefined ? {} : { payload }) })
    t.equal(answer.statusCode, expected.statusCode, what)
    t.strictSame(answer.json(), expected, what)
  }
  t.equal(await snapshotRows(node), before, 'still no row changed')

  const someone = await createWebhook(t, acme.companyId, { url: 'https://example.com/' })
  for (const query of ['?limit=0', '?limit=501', '?limit=x', '?other=1']) {
    const answer = await node.admin('GET', `/admin/v1/webhooks/${someone.id}/deliveries${query}`)
    t.equal(answer.statusCode, 400, query)
    t.equal(answer.json().code, 'VALIDATION_ERROR', query)
  }
  for (const [method, url] of [
    ['POST', `/admin/v1/companies/${acme.companyId}/webhooks`],
    ['GET', `/admin/v1/companies/${acme.companyId}/webhooks`],
    ['DELETE', `/admin/v1/webhooks/${someone.id}`],
    ['GET', `/admin/v1/webhooks/${someone.id}/deliveries`],
  ] as const) {
    const answer = await node.inject({ method, url, headers: { authorization: 'Bearer wrong' }, ...(method === 'POST' ? { payload: { url: 'https://example.com/' } } : {}) })
    t.equal(answer.statusCode, 401, `${method} ${url}`)
    t.strictSame(answer.json(), INVALID_ADMIN_TOKEN)
  }
  t.strictSame((await node.admin('GET', `/admin/v1/companies/${acme.companyId}/webhooks`)).json().length, 1, 'the unauthorised delete deleted nothing')
})

t.test('every event type reaches the endpoint once, signed, in event order; `types` filters', async (t) => {
  const acme = await tenant()
  const everything = await receiver(t)
  const some = await receiver(t)
  const all = await createWebhook(t, acme.companyId, everything)
  await createWebhook(t, acme.companyId, some, ['user.deactivated', 'token.revoked'])

  // The ten types of SPEC §7.2, as test/stores/api/admin/events.test.ts makes them.
  const issued = await issueToken(node, acme, 'alice')
  t.equal((await invalidate(node, acme, issued.user.id)).statusCode, 200)
  const second = await issueToken(node, acme, 'alice')
  t.equal((await post(node, '/rest/v1/auth/revoke-token', { keyId: acme.keyId, keySecret: acme.keySecret, token: second.token })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: true })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: false })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: true })).statusCode, 200)
  t.equal((await node.admin('POST', `/admin/v1/agents/${acme.agentId}/revoke-tokens`)).statusCode, 200)
  t.equal((await node.admin('POST', `/admin/v1/companies/${acme.companyId}/revoke-tokens`)).statusCode, 200)
  const extra = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, { name: 'extra' })).json()
  t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${extra.keyId}`)).statusCode, 200)

  const listed = (await events(acme.companyId)).reverse()
  t.equal(listed.length, 11, "the tenant's key, then the ten above")
  t.strictSame(new Set(listed.map((e) => e.type)).size, 10, 'every type')
  // created before the webhook: not sent
  const expected = listed.filter((e) => e.type !== 'api_key.created' || e.subject.keyId === extra.keyId)
  await waitFor('every event at the receiver', () => everything.received.length >= expected.length)
  t.strictSame(
    everything.received.map((r) => r.event),
    expected.map((e) => ({ ...e, companyId: acme.companyId })),
    'each event once, as the events listing shows it (and its company), in event order',
  )
  for (const request of everything.received) {
    t.ok(request.verified, `${request.event.type}: the standardwebhooks package verifies the signature`)
    t.equal(request.headers['webhook-id'], request.event.id)
    t.match(request.headers['webhook-timestamp'], /^\d{10}$/)
    t.match(request.headers['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/)
    t.equal(request.headers['content-type'], 'application/json')
  }
  t.throws(() => new Webhook(all.secret).verify(everything.received[0]!.body.replace('"type"', '"Type"'), everything.received[0]!.headers), 'a changed body fails the check')

  await waitFor('the filtered endpoint', () => some.received.length >= 2)
  t.strictSame(
    some.received.map((r) => r.event.type),
    ['token.revoked', 'user.deactivated'],
    'only its types',
  )
  t.ok(some.received.every((r) => r.verified), 'signed with its own secret')

  const listing = await waitFor('every delivery recorded', () => deliveries(all.id), { until: (list) => list.every((d) => d.status === 'delivered') && list.length === expected.length })
  t.strictSame(listing.map((d) => d.eventId), expected.map((e) => e.id).reverse(), 'newest event first')
  for (const delivery of listing) {
    t.match(delivery, { status: 'delivered', attempt: 1, responseStatus: 200, error: null, nextAttemptAt: null })
    t.match(delivery.at, ISO_RE)
  }
  t.same(await serverErrorCounts(node), [])
})

t.test('a receiver that fails 3 times, then succeeds: retried with backoff, then delivered', async (t) => {
  const acme = await tenant()
  const flaky = await receiver(t)
  flaky.behave = (request) => (request.n <= 3 ? 500 : 204)
  const hook = await createWebhook(t, acme.companyId, flaky, ['tokens.invalidated'])
  const { user } = await issueToken(node, acme, 'bob')
  t.equal((await invalidate(node, acme, user.id)).statusCode, 200)
  await waitFor('four attempts', () => flaky.received.length >= 4)
  t.equal(new Set(flaky.received.map((r) => r.headers['webhook-id'])).size, 1, 'the same event, the same webhook-id')
  t.ok(flaky.received.every((r) => r.verified), 'each attempt signed')
  const [delivery] = await waitFor('delivered', () => deliveries(hook.id), { until: (list) => list[0]?.status === 'delivered' })
  t.match(delivery, { eventType: 'tokens.invalidated', status: 'delivered', attempt: 4, responseStatus: 204, error: null, nextAttemptAt: null })
  t.equal(flaky.received.length, 4, 'no attempt after the 2xx')
})

t.test('a failing attempt is listed with its status, error and next attempt; given up after 24 h', async (t) => {
  const acme = await tenant()
  const failing = await receiver(t)
  failing.behave = () => 503
  const hook = await createWebhook(t, acme.companyId, failing, ['tokens.invalidated'])
  const { user } = await issueToken(node, acme, 'carol')
  t.equal((await invalidate(node, acme, user.id)).statusCode, 200)
  const [delivery] = await waitFor('a failed attempt', () => deliveries(hook.id), { until: (list) => (list[0]?.attempt ?? 0) >= 1 })
  t.equal(delivery!.status, 'retrying')
  t.equal(delivery!.responseStatus, 503)
  t.equal(delivery!.error, 'answered 503')
  t.match(delivery!.nextAttemptAt, ISO_RE)
  t.match(delivery!.at, ISO_RE)

  // 24 h on: the next failure is the last (the schedule itself: test/unit/webhook-schedule.test.ts).
  await node.gateway.db.query(`UPDATE webhook_delivery SET created_at = now() - interval '24 hours 1 second' WHERE webhook_id = $1`, [hook.id])
  const [given] = await waitFor('given up', () => deliveries(hook.id), { until: (list) => list[0]?.status === 'failed' })
  t.match(given, { status: 'failed', responseStatus: 503, error: 'answered 503', nextAttemptAt: null })
  const logged = node.logs.filter((line) => line.includes(hook.id))
  t.ok(logged.length >= 1, `failing attempts logged (${logged.length} lines for ${given!.attempt} attempts: one per 5 s)`)
  t.match(logged[0], /"error":"answered 503"/)
  t.notOk(node.logs.some((line) => line.includes(failing.url)), 'never the URL')
  await node.admin('DELETE', `/admin/v1/webhooks/${hook.id}`)
})

t.test('a redirect is not followed: a 3xx is a failure, retried; the target never hears of it', async (t) => {
  const acme = await tenant()
  const target = await receiver(t)
  const redirecting = await receiver(t)
  redirecting.behave = () => ({ redirect: target.url })
  const hook = await createWebhook(t, acme.companyId, redirecting, ['tokens.invalidated'])
  const { user } = await issueToken(node, acme, 'dave')
  t.equal((await invalidate(node, acme, user.id)).statusCode, 200)
  await waitFor('retried', () => redirecting.received.length >= 3)
  const [delivery] = await deliveries(hook.id)
  t.match(delivery, { status: 'retrying', responseStatus: 307, error: 'answered 307' })
  t.ok(delivery!.attempt >= 2)
  t.equal(target.received.length, 0, 'nothing reached the redirect target')
  await node.admin('DELETE', `/admin/v1/webhooks/${hook.id}`)
})

t.test('a refused connection is retried until the receiver listens', async (t) => {
  const acme = await tenant()
  const port = await freePort()
  const hook = await createWebhook(t, acme.companyId, { url: `http://127.0.0.1:${port}/hook` }, ['tokens.invalidated'])
  const { user } = await issueToken(node, acme, 'erin')
  t.equal((await invalidate(node, acme, user.id)).statusCode, 200)
  const [refused] = await waitFor('refused twice', () => deliveries(hook.id), { until: (list) => (list[0]?.attempt ?? 0) >= 2 })
  t.match(refused, { status: 'retrying', responseStatus: null, error: 'could not connect: ECONNREFUSED' })
  const late = await startWebhookReceiver({ port })
  t.teardown(() => late.close())
  late.secret = hook.secret
  await waitFor('delivered once it listens', () => late.received.length >= 1)
  t.ok(late.received[0]!.verified)
  t.equal(late.received[0]!.event.type, 'tokens.invalidated')
  const [delivered] = await waitFor('recorded', () => deliveries(hook.id), { until: (list) => list[0]?.status === 'delivered' })
  t.ok(delivered!.attempt >= 3, `delivered at attempt ${delivered!.attempt}`)
})

t.test('a receiver that hangs: the writes answer while it holds the request; the 5 s timeout retries it', async (t) => {
  const acme = await tenant()
  const hanging = await receiver(t)
  hanging.behave = (request) => (request.n === 1 ? 'hang' : 200)
  const hook = await createWebhook(t, acme.companyId, hanging, ['tokens.invalidated'])
  const { user } = await issueToken(node, acme, 'frank')
  t.equal((await invalidate(node, acme, user.id)).statusCode, 200)
  await waitFor('the first request, held', () => hanging.received.length >= 1)
  // The receiver holds it unanswered: a write made now cannot be waiting for it.
  for (let i = 0; i < 3; i++) t.equal((await invalidate(node, acme, user.id)).statusCode, 200, 'a write answers while the receiver hangs')
  t.equal(hanging.received[0]!.answered, false, 'the receiver had answered nothing when the writes answered')
  await waitFor('the timed-out event sent again', () => hanging.received.filter((r) => r.event.id === hanging.received[0]!.event.id).length >= 2, { timeoutMs: 20_000 })
  await waitFor('all four events delivered', () => deliveries(hook.id), { until: (list) => list.length === 4 && list.every((d) => d.status === 'delivered'), timeoutMs: 20_000 })
  const counts = hanging.countsByEvent()
  t.equal(counts.size, 4)
  t.equal(counts.get(hanging.received[0]!.event.id), 2, 'the held one twice (it timed out), the others once')
  t.equal(hanging.received[0]!.answered, false, 'the held request was never answered: the sender gave up on it')
})

t.test('a deleted webhook gets nothing more; secrets never in logs, events or listings', async (t) => {
  const acme = await tenant()
  const hooked = await receiver(t)
  const hook = await createWebhook(t, acme.companyId, hooked)
  t.equal((await node.admin('DELETE', `/admin/v1/webhooks/${hook.id}`)).statusCode, 200)
  const { user } = await issueToken(node, acme, 'gina')
  t.equal((await invalidate(node, acme, user.id)).statusCode, 200)
  const queued = await node.gateway.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_delivery WHERE webhook_id = $1`, [hook.id])
  t.equal(queued[0]!.n, 0, 'nothing queued for it')

  const allEvents = JSON.stringify(await events(acme.companyId))
  t.ok(secrets.length > 3)
  for (const secret of secrets) t.notOk(allEvents.includes(secret))
  t.strictSame(leakedLogLines(node.logs, secrets), [], 'no webhook secret in the log')
})
