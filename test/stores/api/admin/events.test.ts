/**
 * The audit trail, black box: `GET /admin/v1/companies/:companyId/events` — one event per
 * change of every type, with its actor, subject and detail; none for a refused or repeated
 * change; newest first, a page at a time through an opaque cursor; bad input a 400; no
 * secret in any event; retention.
 */
import t from 'tap'
import { ConfigError, loadConfig } from '../../../../src/config.js'
import {
  createTenant,
  decodeToken,
  errorBody,
  invalidate,
  ISO_RE,
  issueToken,
  leakedLogLines,
  post,
  randomUUID,
  serverErrorCounts,
  sharedDb,
  startApp,
  type Tenant,
} from '../../../support/helpers.js'
import { INVALID_ADMIN_TOKEN } from '../../../support/spec-bodies.js'

const node = await startApp(t)
const tenant = (name = 'Acme'): Promise<Tenant> => createTenant(node, name)

async function events(companyId: string, query = '') {
  const response = await node.admin('GET', `/admin/v1/companies/${companyId}/events${query}`)
  if (response.statusCode !== 200) throw new Error(`events: ${response.statusCode} ${response.body}`)
  return response.json() as { events: Array<{ id: string; type: string; at: string; actor: Record<string, unknown>; subject: Record<string, unknown>; detail: Record<string, unknown> }>; next: string | null }
}

t.test('every change writes one event, with its actor, subject and detail, newest first', async (t) => {
  const acme = await tenant()
  const admin = { kind: 'admin' }
  const byKey = { kind: 'apiKey', keyId: acme.keyId }
  const created = await events(acme.companyId)
  t.strictSame(
    created.events.map((e) => [e.type, e.actor, e.subject, e.detail]),
    [['api_key.created', admin, { kind: 'apiKey', keyId: acme.keyId }, { name: 'test' }]],
    'creating the key is the first event (creating a company or an agent is not audited)',
  )

  const issued = await issueToken(node, acme, 'alice')
  t.equal((await invalidate(node, acme, issued.user.id)).statusCode, 200)
  const second = await issueToken(node, acme, 'alice')
  const { jti } = decodeToken(second.token).payload as { jti: string }
  t.equal((await post(node, '/rest/v1/auth/revoke-token', { keyId: acme.keyId, keySecret: acme.keySecret, token: second.token })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: true })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: false })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: true })).statusCode, 200)
  t.equal((await node.admin('POST', `/admin/v1/agents/${acme.agentId}/revoke-tokens`)).statusCode, 200)
  t.equal((await node.admin('POST', `/admin/v1/companies/${acme.companyId}/revoke-tokens`)).statusCode, 200)
  t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${acme.keyId}`)).statusCode, 200)

  const user = { kind: 'user', id: issued.user.id, externalId: 'alice' }
  const agent = { kind: 'agent', id: acme.agentId }
  const { events: list, next } = await events(acme.companyId)
  t.equal(next, null)
  t.strictSame(
    list.map((e) => [e.type, e.actor, e.subject, e.detail]),
    [
      ['api_key.revoked', admin, { kind: 'apiKey', keyId: acme.keyId }, {}],
      ['company.tokens_revoked', admin, { kind: 'company', id: acme.companyId }, { tokensGeneration: 1 }],
      ['agent.tokens_revoked', admin, agent, { tokensGeneration: 1 }],
      ['agent.activated', admin, agent, {}],
      ['agent.deactivated', admin, agent, {}],
      ['user.activated', admin, user, {}],
      ['user.deactivated', admin, user, {}],
      ['token.revoked', byKey, { kind: 'token', jti }, { userId: issued.user.id, expiresAt: second.expiresAt }],
      ['tokens.invalidated', byKey, user, { newTokenVersion: 1 }],
      ['api_key.created', admin, { kind: 'apiKey', keyId: acme.keyId }, { name: 'test' }],
    ],
  )
  for (const event of list) {
    t.match(event.id, /^\d+$/)
    t.match(event.at, ISO_RE)
  }
  const ids = list.map((e) => BigInt(e.id))
  t.ok(ids.every((id, i) => i === 0 || id < ids[i - 1]!), 'newest first')
})

t.test('a refused, repeated or unchanged write leaves no event', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'bob')
  const before = (await events(acme.companyId)).events.length
  t.equal((await invalidate(node, acme, randomUUID())).statusCode, 400, 'an unknown user')
  t.equal((await post(node, '/rest/v1/auth/revoke-token', { keyId: acme.keyId, keySecret: acme.keySecret, token: 'x.y.z' })).statusCode, 400, 'not a token')
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: true })).statusCode, 200, 'already active')
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { name: 'renamed' })).statusCode, 200, 'a rename')
  t.equal((await node.admin('POST', `/admin/v1/companies/${randomUUID()}/revoke-tokens`)).statusCode, 404)
  t.equal((await events(acme.companyId)).events.length, before, 'no event')

  const token = (await issueToken(node, acme, 'bob')).token
  for (let i = 0; i < 2; i++) t.equal((await post(node, '/rest/v1/auth/revoke-token', { keyId: acme.keyId, keySecret: acme.keySecret, token })).statusCode, 200)
  const extra = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, {})).json()
  for (let i = 0; i < 2; i++) t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${extra.keyId}`)).statusCode, 200)
  t.strictSame(
    (await events(acme.companyId)).events.slice(0, 3).map((e) => e.type),
    ['api_key.revoked', 'api_key.created', 'token.revoked'],
    'a repeated revocation is one event',
  )
})

t.test('pages: limit, an opaque next cursor, null at the end; other companies\' events never listed', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const issued = await issueToken(node, acme, 'carol')
  for (let i = 0; i < 6; i++) t.equal((await invalidate(node, acme, issued.user.id)).statusCode, 200)
  t.equal((await invalidate(node, other, (await issueToken(node, other, 'carol')).user.id)).statusCode, 200)

  const all = (await events(acme.companyId)).events
  t.equal(all.length, 7, 'six invalidations and the key\'s creation')
  const seen: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const page = await events(acme.companyId, `?limit=3${cursor ? `&before=${cursor}` : ''}`)
    t.ok(page.events.length <= 3)
    seen.push(...page.events.map((e) => e.id))
    cursor = page.next
    if (cursor !== null) t.notMatch(cursor, /^\d+$/, 'the cursor is not a bare id')
    pages++
  } while (cursor !== null && pages < 10)
  t.equal(pages, 3)
  t.strictSame(seen, all.map((e) => e.id), 'the pages together are the whole list, in order')
  t.strictSame((await events(acme.companyId, '?limit=1')).events.map((e) => e.detail), [{ newTokenVersion: 6 }])
  t.equal((await events(acme.companyId, '?limit=500')).events.length, 7)
  t.ok((await events(other.companyId)).events.every((e) => e.subject.keyId !== acme.keyId && e.subject.id !== issued.user.id))
})

t.test('a cursor belongs to its company: another company\'s cursor or a hand-made one is a 400', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  for (const company of [acme, other]) {
    const issued = await issueToken(node, company, 'carol')
    for (let i = 0; i < 3; i++) t.equal((await invalidate(node, company, issued.user.id)).statusCode, 200)
  }
  const acmeNext = (await events(acme.companyId, '?limit=1')).next
  const otherNext = (await events(other.companyId, '?limit=1')).next
  t.type(acmeNext, 'string')
  t.type(otherNext, 'string')
  t.equal((await events(acme.companyId, `?limit=1&before=${acmeNext}`)).events.length, 1, 'its own cursor pages on')
  const forged = [otherNext!, Buffer.from('e1.999999999999').toString('base64url'), Buffer.from(`e1.${(await events(acme.companyId)).events[0]!.id}`).toString('base64url')]
  const tampered = Buffer.from(acmeNext!, 'base64url')
  tampered[tampered.length - 1]! ^= 1
  forged.push(tampered.toString('base64url'))
  for (const cursor of forged) {
    const response = await node.admin('GET', `/admin/v1/companies/${acme.companyId}/events?before=${cursor}`)
    t.equal(response.statusCode, 400, cursor)
    t.strictSame(response.json(), errorBody(400, 'before must be a cursor returned as next by this listing', 'VALIDATION_ERROR'), cursor)
  }
})

t.test('a cursor is read by every node of the store, whatever its JWT keys (a rotation keeps it valid)', async (t) => {
  const db = await sharedDb(t)
  const first = await startApp(t, {}, { db })
  const acme = await createTenant(first)
  const issued = await issueToken(first, acme, 'carol')
  for (let i = 0; i < 3; i++) t.equal((await invalidate(first, acme, issued.user.id)).statusCode, 200)
  const page = (await first.admin('GET', `/admin/v1/companies/${acme.companyId}/events?limit=2`)).json()
  const rotated = await startApp(t, { JWT_SECRET: 'another-secret-of-a-rotation-'.padEnd(48, 'x') }, { db })
  const next = await rotated.admin('GET', `/admin/v1/companies/${acme.companyId}/events?limit=2&before=${page.next}`)
  t.equal(next.statusCode, 200)
  t.strictSame(next.json().events.map((e: { detail: unknown }) => e.detail), [{ newTokenVersion: 1 }, { name: 'test' }], 'the next page, on the other node: the first invalidation, then the key\'s creation')
})

t.test('bad input is a 400 with the error body, an unknown company a 404, no admin token a 401', async (t) => {
  const acme = await tenant()
  for (const query of ['?limit=0', '?limit=501', '?limit=abc', '?limit=-1', '?limit=1.5', '?limit=', '?before=', '?before=abc', '?before=12', `?before=${Buffer.from('e1.0').toString('base64url')}`, '?limit=10&limit=20', '?page=2']) {
    const response = await node.admin('GET', `/admin/v1/companies/${acme.companyId}/events${query}`)
    t.equal(response.statusCode, 400, query)
    t.equal(response.json().statusCode, 400, query)
    t.equal(response.json().code, 'VALIDATION_ERROR', query)
    t.type(response.json().message, 'string')
  }
  for (const id of [randomUUID(), 'not-a-uuid']) {
    const response = await node.admin('GET', `/admin/v1/companies/${id}/events`)
    t.equal(response.statusCode, 404)
    t.strictSame(response.json(), errorBody(404, 'Company not found', 'NOT_FOUND'))
  }
  const response = await node.inject({ method: 'GET', url: `/admin/v1/companies/${acme.companyId}/events`, headers: { authorization: 'Bearer wrong' }, remoteAddress: '10.9.1.1' })
  t.equal(response.statusCode, 401)
  t.strictSame(response.json(), INVALID_ADMIN_TOKEN)
})

t.test('no event holds a secret or a whole token', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'dave')
  t.equal((await post(node, '/rest/v1/auth/revoke-token', { keyId: acme.keyId, keySecret: acme.keySecret, token: issued.token })).statusCode, 200)
  const text = JSON.stringify(await node.gateway.db.query('SELECT * FROM event'))
  t.notOk(text.includes(acme.keySecret), 'no key secret')
  t.notOk(text.includes(issued.token.split('.')[2]!), 'no token')
  t.strictSame(leakedLogLines([text]), [])
})

t.test('retention: events older than EVENT_RETENTION_DAYS are pruned; the setting is checked at boot', async (t) => {
  const acme = await tenant()
  t.equal((await invalidate(node, acme, (await issueToken(node, acme, 'erin')).user.id)).statusCode, 200)
  const [oldest] = (await events(acme.companyId)).events.slice(-1)
  await node.gateway.db.query(`UPDATE event SET at = now() - interval '91 days' WHERE id = $1`, [oldest!.id])
  const pruned = await node.gateway.housekeeping.runOnce()
  t.ok(pruned.events >= 1)
  t.strictSame((await events(acme.companyId)).events.map((e) => e.type), ['tokens.invalidated'], 'the 91-day-old event is gone, the new one kept (default 90 days)')

  t.equal(loadConfig({ EVENT_RETENTION_DAYS: '7' }).eventRetentionDays, 7)
  t.equal(loadConfig({}).eventRetentionDays, 90)
  for (const bad of ['0', '-1', 'x', '36501', '1.5']) t.throws(() => loadConfig({ EVENT_RETENTION_DAYS: bad }), ConfigError, bad)
})

t.test('no 5xx, and no secret or whole token in the logs', async (t) => {
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs), [])
})
