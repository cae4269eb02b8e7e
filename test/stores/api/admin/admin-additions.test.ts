/**
 * SPEC §10.2, what the admin API adds for the console: receipts in the answers of changes, an
 * operator's invalidation of a user and revocation of any company's token, a user found by
 * its external id, companies searched by name and paged, a webhook delivery queued again,
 * the preview of a company's or agent's revocation, and the nodes.
 */
import t, { type Test } from 'tap'
import { createTenant, errorBody, forgeHs256, hs256Kid, ISO_RE, issueToken, nowSeconds, randomUUID, snapshotRows, startApp, verify } from '../../../support/helpers.js'

const node = await startApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', MAX_LIVE_TOKEN_REVOCATIONS: '2' })
const acme = await createTenant(node, 'Additions Co')
const notFound = (what: string) => errorBody(404, `${what} not found`, 'NOT_FOUND')
const validation = (message: string) => errorBody(400, message, 'VALIDATION_ERROR')

/** The embedded store's receipt: its one node acknowledged, with the sessions it ended. */
function embeddedReceipt(t: Test, receipt: unknown, sessionsEnded = 0) {
  t.match(receipt, { changeId: /^embedded\.\d+$/, outcome: 'embedded', nodes: [{ nodeId: 'embedded', ackedAfterMs: Number, sessionsEnded }] })
  t.equal((receipt as { nodes: unknown[] }).nodes.length, 1)
}

t.test('the answers of changes carry their receipt; the sessions a change ended are counted', async (t) => {
  const issued = await issueToken(node, acme, 'receipt-user')
  const session = await node.gateway.sessions.open(issued.token)
  t.ok(session.ok, 'a session is open on this node')
  const deactivated = await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })
  embeddedReceipt(t, deactivated.json().receipt, 1)
  const agent = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'spare' })).json()
  embeddedReceipt(t, (await node.admin('PATCH', `/admin/v1/agents/${agent.id}`, { active: false })).json().receipt)
  embeddedReceipt(t, (await node.admin('POST', `/admin/v1/agents/${agent.id}/revoke-tokens`)).json().receipt)
  const key = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, {})).json()
  embeddedReceipt(t, (await node.admin('DELETE', `/admin/v1/api-keys/${key.keyId}`)).json().receipt)
  const other = await createTenant(node, 'Other Co')
  embeddedReceipt(t, (await node.admin('POST', `/admin/v1/companies/${other.companyId}/revoke-tokens`)).json().receipt)
})

t.test('POST /customer-users/:id/invalidate: every token of the user refused when it answers', async (t) => {
  const issued = await issueToken(node, acme, 'invalidated-user')
  const answer = await node.admin('POST', `/admin/v1/customer-users/${issued.user.id}/invalidate`)
  t.equal(answer.statusCode, 200)
  t.same(Object.keys(answer.json()).sort(), ['customerUserId', 'newTokenVersion', 'receipt'])
  t.match(answer.json(), { customerUserId: issued.user.id, newTokenVersion: 1 })
  embeddedReceipt(t, answer.json().receipt)
  t.equal((await verify(node, issued.token)).json().code, 'TOKEN_REVOKED')
  t.equal((await node.admin('POST', `/admin/v1/customer-users/${issued.user.id.toUpperCase()}/invalidate`)).json().newTokenVersion, 2, 'an upper-case id names the user')
  for (const id of [randomUUID(), 'nope']) t.strictSame((await node.admin('POST', `/admin/v1/customer-users/${id}/invalidate`)).json(), notFound('Customer user'), id)
})

t.test("POST /tokens/revoke: any company's token; a repeat, or an expired one, answers with no receipt", async (t) => {
  const other = await createTenant(node, 'Far Co')
  const issued = await issueToken(node, other, 'far-user')
  const answer = await node.admin('POST', '/admin/v1/tokens/revoke', { token: issued.token })
  t.equal(answer.statusCode, 200)
  t.same(Object.keys(answer.json()).sort(), ['expiresAt', 'jti', 'message', 'receipt'])
  t.match(answer.json(), { message: 'Token revoked successfully', jti: String, expiresAt: ISO_RE })
  embeddedReceipt(t, answer.json().receipt)
  t.equal((await verify(node, issued.token)).json().code, 'TOKEN_REVOKED')
  const again = await node.admin('POST', '/admin/v1/tokens/revoke', { token: issued.token })
  t.equal(again.statusCode, 200)
  t.equal(again.json().receipt, null, 'already revoked')
  const claims = { sub: issued.user.id, companyId: other.companyId, agentId: other.agentId, tokenVersion: 0, jti: randomUUID(), iat: nowSeconds() - 7200, exp: nowSeconds() - 3600 }
  const expired = await node.admin('POST', '/admin/v1/tokens/revoke', { token: forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, claims) })
  t.equal(expired.statusCode, 200)
  t.equal(expired.json().receipt, null, 'expired: nothing to refuse')
  const before = await snapshotRows(node)
  for (const token of [issued.token.slice(0, -2) + 'xx', 'not.a.token', forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...claims, exp: nowSeconds() + 60 }, 'another-secret-of-32-bytes-at-least!!')]) {
    const refused = await node.admin('POST', '/admin/v1/tokens/revoke', { token })
    t.equal(refused.statusCode, 400)
    t.strictSame(refused.json(), errorBody(400, 'Token not found or does not belong to your company', 'TOKEN_NOT_FOUND'))
  }
  t.equal(await snapshotRows(node), before, 'a refusal writes nothing')
  // MAX_LIVE_TOKEN_REVOCATIONS=2: the company's limit applies to the admin API too
  await node.admin('POST', '/admin/v1/tokens/revoke', { token: (await issueToken(node, other, 'second')).token })
  const limited = await node.admin('POST', '/admin/v1/tokens/revoke', { token: (await issueToken(node, other, 'third')).token })
  t.equal(limited.statusCode, 409)
  t.equal(limited.json().code, 'REVOCATION_LIMIT')
  const events = (await node.admin('GET', `/admin/v1/companies/${other.companyId}/events`)).json().events as Array<{ type: string; actor: unknown }>
  t.strictSame(events.find((e) => e.type === 'token.revoked')?.actor, { kind: 'admin' })
})

t.test('GET /customer-users?companyId=&externalId=: the user; 404 when none; 400 without both', async (t) => {
  const issued = await issueToken(node, acme, 'Find Me ☂')
  const byId = (await node.admin('GET', `/admin/v1/customer-users/${issued.user.id}`)).json()
  const found = await node.admin('GET', `/admin/v1/customer-users?companyId=${acme.companyId}&externalId=${encodeURIComponent('Find Me ☂')}`)
  t.equal(found.statusCode, 200)
  t.strictSame(found.json(), byId)
  t.equal((await node.admin('GET', `/admin/v1/customer-users?companyId=${acme.companyId.toUpperCase()}&externalId=${encodeURIComponent('Find Me ☂')}`)).json().id, issued.user.id)
  for (const query of [`companyId=${acme.companyId}&externalId=find%20me%20%E2%98%82`, `companyId=${randomUUID()}&externalId=x`, 'companyId=nope&externalId=x']) {
    t.strictSame((await node.admin('GET', `/admin/v1/customer-users?${query}`)).json(), notFound('Customer user'), query)
  }
  for (const query of ['', `companyId=${acme.companyId}`, 'externalId=x']) {
    t.strictSame((await node.admin('GET', `/admin/v1/customer-users?${query}`)).json(), validation('companyId and externalId are both required'), query)
  }
  t.equal((await node.admin('GET', `/admin/v1/customer-users?companyId=${acme.companyId}&externalId=x&extra=1`)).statusCode, 400, 'an unknown parameter')
})

t.test('GET /companies: by name (contains, any case), ordered by name then id, paged with next', async (t) => {
  const names = ['Zeta Search', 'alpha search', 'Beta SEARCH', 'beta search', 'Gamma 100%_search']
  for (const name of names) await node.admin('POST', '/admin/v1/companies', { name })
  const all = (await node.admin('GET', '/admin/v1/companies?query=search&limit=100')).json()
  t.same(all.companies.map((c: { name: string }) => c.name).sort(), [...names].sort())
  t.equal(all.next, null)
  const pages: string[] = []
  let after: string | null = null
  do {
    const page: { companies: Array<{ id: string }>; next: string | null } = (await node.admin('GET', `/admin/v1/companies?query=SEARCH&limit=2${after ? `&after=${after}` : ''}`)).json()
    t.ok(page.companies.length <= 2)
    pages.push(...page.companies.map((c) => c.id))
    after = page.next
  } while (after !== null)
  t.strictSame(pages, all.companies.map((c: { id: string }) => c.id), 'the pages, in order, are the whole listing')
  t.strictSame((await node.admin('GET', '/admin/v1/companies?query=100%25_')).json().companies.map((c: { name: string }) => c.name), ['Gamma 100%_search'], '% and _ are plain characters')
  const everything = (await node.admin('GET', '/admin/v1/companies')).json()
  t.ok(everything.companies.length >= 7, 'no query: every company')
  t.strictSame((await node.admin('GET', '/admin/v1/companies?query=')).json().companies.length, everything.companies.length, 'an empty query: every company')
  for (const [query, message] of <Array<[string, string]>>[
    ['limit=0', 'limit must be an integer from 1 to 100'],
    ['limit=101', 'limit must be an integer from 1 to 100'],
    ['after=garbage', 'after must be a cursor returned as next by this listing'],
    [`after=${Buffer.from('["x","nope"]').toString('base64url')}`, 'after must be a cursor returned as next by this listing'],
  ]) {
    t.strictSame((await node.admin('GET', `/admin/v1/companies?${query}`)).json(), validation(message), query)
  }
})

t.test('POST /webhook-deliveries/:id/redeliver: a new delivery of that event, due now, shown in the listing', async (t) => {
  const company = await createTenant(node, 'Hook Co')
  const webhook = (await node.admin('POST', `/admin/v1/companies/${company.companyId}/webhooks`, { url: 'http://127.0.0.1:9/hook' })).json()
  const issued = await issueToken(node, company, 'hooked')
  await node.admin('POST', `/admin/v1/customer-users/${issued.user.id}/invalidate`)
  const [first] = (await node.admin('GET', `/admin/v1/webhooks/${webhook.id}/deliveries`)).json()
  t.match(first, { deliveryId: /^[0-9]+$/, eventType: 'tokens.invalidated' })
  const answer = await node.admin('POST', `/admin/v1/webhook-deliveries/${first.deliveryId}/redeliver`)
  t.equal(answer.statusCode, 202)
  t.strictSame(answer.json(), { deliveryId: answer.json().deliveryId, webhookId: webhook.id, eventId: first.eventId, status: 'pending' })
  t.not(answer.json().deliveryId, first.deliveryId)
  const listed = (await node.admin('GET', `/admin/v1/webhooks/${webhook.id}/deliveries`)).json() as Array<{ deliveryId: string; eventId: string }>
  t.strictSame(listed.filter((d) => d.eventId === first.eventId).map((d) => d.deliveryId), [answer.json().deliveryId, first.deliveryId], 'newest first, both of the same event')
  for (const id of ['999999999', '0', 'abc', '99999999999999999999999']) {
    const missing = await node.admin('POST', `/admin/v1/webhook-deliveries/${id}/redeliver`)
    t.equal(missing.statusCode, 404, id)
    t.strictSame(missing.json(), notFound('Webhook delivery'), id)
  }
})

t.test('revocation previews: the active users, and the open sessions', async (t) => {
  const company = await createTenant(node, 'Preview Co')
  const agent2 = (await node.admin('POST', `/admin/v1/companies/${company.companyId}/agents`, { name: 'second' })).json()
  const a = await issueToken(node, company, 'p1')
  await issueToken(node, company, 'p2')
  const c = await issueToken(node, company, 'p3', { agentId: agent2.id })
  await node.admin('PATCH', `/admin/v1/customer-users/${a.user.id}`, { active: false })
  t.ok((await node.gateway.sessions.open(c.token)).ok)
  const companyPreview = await node.admin('GET', `/admin/v1/companies/${company.companyId}/revoke-tokens/preview`)
  t.equal(companyPreview.statusCode, 200)
  t.strictSame(companyPreview.json(), { users: 2, openSessions: 1 })
  t.strictSame((await node.admin('GET', `/admin/v1/agents/${agent2.id}/revoke-tokens/preview`)).json(), { users: 1, openSessions: 1 })
  t.strictSame((await node.admin('GET', `/admin/v1/agents/${company.agentId}/revoke-tokens/preview`)).json(), { users: 1, openSessions: 0 })
  for (const id of [randomUUID(), 'x']) {
    t.strictSame((await node.admin('GET', `/admin/v1/companies/${id}/revoke-tokens/preview`)).json(), notFound('Company'))
    t.strictSame((await node.admin('GET', `/admin/v1/agents/${id}/revoke-tokens/preview`)).json(), notFound('Agent'))
  }
})

t.test('GET /nodes: on the embedded store, the one node', async (t) => {
  const answer = await node.admin('GET', '/admin/v1/nodes')
  t.equal(answer.statusCode, 200)
  const { nodes } = answer.json()
  t.equal(nodes.length, 1)
  t.match(nodes[0], {
    nodeId: 'embedded',
    version: /^\d+\.\d+\.\d+/,
    startedAt: ISO_RE,
    ready: true,
    trusted: true,
    untrustedSince: null,
    behind: { changes: 0, ms: 0 },
    cache: { users: Number, bytes: Number },
    sessions: Number,
    eventStreams: 0,
    redis: null,
  })
  t.same(Object.keys(nodes[0]).sort(), ['behind', 'cache', 'changeLogReadAt', 'clockOffsetMs', 'eventStreams', 'lastChangeAt', 'nodeId', 'ready', 'redis', 'sessions', 'startedAt', 'trusted', 'untrustedSince', 'version'])
})
