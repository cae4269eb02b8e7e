/**
 * SPEC §10.1, operators: created by an admin (the token shown once, kept as a hash), listed
 * without tokens, their token taken wherever ADMIN_TOKEN is, revoked at once; the events
 * they cause name them; their token is never logged nor written into an event.
 */
import { createHash } from 'node:crypto'
import t from 'tap'
import { createTenant, errorBody, invalidate, ISO_RE, issueToken, leakedLogLines, randomUUID, snapshotRows, startApp, UUID_RE, verify } from '../../../support/helpers.js'
import { waitFor } from '../../../support/poll.js'
import { INVALID_ADMIN_TOKEN } from '../../../support/spec-bodies.js'

const node = await startApp(t)
const OPERATOR_TOKEN = /^opt_[A-Za-z0-9_-]{43}$/

const as = (token: string, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  node.inject({ method, url, headers: { authorization: `Bearer ${token}` }, ...(payload === undefined ? {} : { payload: payload as object }) })

async function createOperator(name: string, role: string) {
  const created = await node.admin('POST', '/admin/v1/operators', { name, role })
  if (created.statusCode !== 201) throw new Error(`create operator: ${created.statusCode} ${created.body}`)
  return created.json() as { id: string; name: string; role: string; token: string; createdAt: string }
}

t.test('an admin creates an operator: its token is shown once and kept only as its SHA-256', async (t) => {
  const created = await node.admin('POST', '/admin/v1/operators', { name: 'Dana (support)', role: 'operator' })
  t.equal(created.statusCode, 201)
  const body = created.json()
  t.same(Object.keys(body).sort(), ['createdAt', 'id', 'name', 'role', 'token'])
  t.match(body, { name: 'Dana (support)', role: 'operator' })
  t.match(body.id, UUID_RE)
  t.match(body.token, OPERATOR_TOKEN)
  t.match(body.createdAt, ISO_RE)
  const rows = await node.gateway.db.query<{ token_hash: Uint8Array }>('SELECT token_hash FROM operator WHERE id = $1', [body.id])
  t.equal(Buffer.from(rows[0]!.token_hash).toString('hex'), createHash('sha256').update(body.token).digest('hex'), 'the row holds the hash')
  const dump = JSON.stringify(await node.gateway.db.query('SELECT * FROM operator'))
  t.notOk(dump.includes(body.token), 'never the token')

  const listed = await node.admin('GET', '/admin/v1/operators')
  t.equal(listed.statusCode, 200)
  const mine = (listed.json() as Array<Record<string, unknown>>).find((o) => o.id === body.id)
  t.strictSame(mine, { id: body.id, name: 'Dana (support)', role: 'operator', createdAt: body.createdAt, revokedAt: null, lastUsedAt: null }, 'listed without its token')
})

t.test('each role is accepted; a bad name or role is a 400 and creates nothing', async (t) => {
  for (const role of ['viewer', 'operator', 'admin']) t.equal((await node.admin('POST', '/admin/v1/operators', { name: `a ${role}`, role })).statusCode, 201, role)
  const before = await snapshotRows(node)
  const bad: unknown[] = [{ name: 'x', role: 'root' }, { name: 'x' }, { role: 'viewer' }, { name: '', role: 'viewer' }, { name: 'x'.repeat(201), role: 'viewer' }, { name: 'x', role: 'viewer', token: 'opt_mine' }, { name: 7, role: 'viewer' }]
  for (const payload of bad) {
    const answer = await node.admin('POST', '/admin/v1/operators', payload)
    t.equal(answer.statusCode, 400, JSON.stringify(payload))
    t.equal(answer.json().code, 'VALIDATION_ERROR', JSON.stringify(payload))
  }
  t.equal(await snapshotRows(node), before, 'no operator made')
})

t.test("an operator's token is taken wherever ADMIN_TOKEN is, and its use is recorded", async (t) => {
  const acme = await createTenant(node, 'Token Co')
  const viewer = await createOperator('Vic', 'viewer')
  const company = await as(viewer.token, 'GET', `/admin/v1/companies/${acme.companyId}`)
  t.equal(company.statusCode, 200)
  t.equal(company.json().id, acme.companyId)
  const used = await waitFor('lastUsedAt to be written', async () => ((await node.admin('GET', '/admin/v1/operators')).json() as Array<{ id: string; lastUsedAt: string | null }>).find((o) => o.id === viewer.id)!, {
    until: (operator) => operator.lastUsedAt !== null,
  })
  t.match(used.lastUsedAt, ISO_RE)
})

t.test('the events an operator causes name it: {kind: "operator", id, name}', async (t) => {
  const acme = await createTenant(node, 'Events Co')
  const { user } = await issueToken(node, acme, 'eve')
  const operator = await createOperator('Oscar', 'operator')
  t.equal((await as(operator.token, 'PATCH', `/admin/v1/customer-users/${user.id}`, { active: false })).statusCode, 200)
  t.equal((await as(operator.token, 'POST', `/admin/v1/customer-users/${user.id}/invalidate`)).statusCode, 200)
  t.equal((await as(operator.token, 'POST', `/admin/v1/companies/${acme.companyId}/revoke-tokens`)).statusCode, 200)
  const events = (await node.admin('GET', `/admin/v1/companies/${acme.companyId}/events`)).json().events as Array<{ type: string; actor: unknown }>
  const byOperator = { kind: 'operator', id: operator.id, name: 'Oscar' }
  t.strictSame(
    events.filter((e) => ['user.deactivated', 'tokens.invalidated', 'company.tokens_revoked'].includes(e.type)).map((e) => [e.type, e.actor]),
    [
      ['company.tokens_revoked', byOperator],
      ['tokens.invalidated', byOperator],
      ['user.deactivated', byOperator],
    ],
  )
  t.strictSame(events.find((e) => e.type === 'api_key.created')?.actor, { kind: 'admin' }, 'ADMIN_TOKEN stays {kind: "admin"}')
  const stored = JSON.stringify(await node.gateway.db.query('SELECT * FROM event'))
  t.notOk(stored.includes(operator.token), 'the token is in no event')
})

t.test('revoked: its token is refused at once; the revocation is idempotent; 404 for an unknown id', async (t) => {
  const operator = await createOperator('Rita', 'admin')
  t.equal((await as(operator.token, 'GET', '/admin/v1/operators')).statusCode, 200, 'an admin operator lists operators')
  const revoked = await node.admin('DELETE', `/admin/v1/operators/${operator.id}`)
  t.equal(revoked.statusCode, 200)
  t.same(Object.keys(revoked.json()).sort(), ['id', 'revokedAt'])
  t.equal(revoked.json().id, operator.id)
  t.match(revoked.json().revokedAt, ISO_RE)
  const refused = await as(operator.token, 'GET', '/admin/v1/operators')
  t.equal(refused.statusCode, 401)
  t.strictSame(refused.json(), INVALID_ADMIN_TOKEN)
  const again = await node.admin('DELETE', `/admin/v1/operators/${operator.id}`)
  t.strictSame(again.json(), revoked.json(), 'a repeat keeps the first time')
  const listed = (await node.admin('GET', '/admin/v1/operators')).json() as Array<{ id: string; revokedAt: string | null }>
  t.equal(listed.find((o) => o.id === operator.id)?.revokedAt, revoked.json().revokedAt)
  for (const id of [randomUUID(), 'not-a-uuid']) {
    const missing = await node.admin('DELETE', `/admin/v1/operators/${id}`)
    t.equal(missing.statusCode, 404, id)
    t.strictSame(missing.json(), errorBody(404, 'Operator not found', 'NOT_FOUND'), id)
  }
})

t.test("a token shaped like an operator's but unknown is a 401, and a guess counts like one of ADMIN_TOKEN", async (t) => {
  const limited = await startApp(t, { AUTH_FAILURE_LIMIT: '3' })
  const guess = 'opt_' + 'A'.repeat(43)
  for (let i = 0; i < 3; i++) {
    const answer = await limited.inject({ method: 'GET', url: '/admin/v1/nodes', headers: { authorization: `Bearer ${guess}` } })
    t.equal(answer.statusCode, 401)
    t.strictSame(answer.json(), INVALID_ADMIN_TOKEN)
  }
  const blocked = await limited.inject({ method: 'GET', url: '/admin/v1/nodes', headers: { authorization: `Bearer ${guess}` } })
  t.equal(blocked.statusCode, 429)
  t.equal(blocked.json().code, 'RATE_LIMITED')
})

t.test('no operator token reaches the log', async (t) => {
  const acme = await createTenant(node, 'Log Co')
  const { token, user } = await issueToken(node, acme, 'lou')
  const operator = await createOperator('Lou', 'operator')
  await as(operator.token, 'POST', '/admin/v1/tokens/revoke', { token })
  await as(operator.token, 'GET', '/admin/v1/nope')
  await invalidate(node, acme, user.id)
  t.equal((await verify(node, token)).statusCode, 401)
  t.same(leakedLogLines(node.logs, [operator.token]), [])
})
