/**
 * SPEC §4 admin API, black box: every call's answer, the admin token, 404 on unknown ids,
 * default agents, API keys (secret shown once, idempotent revocation), and that
 * deactivations and revocations take effect before the call returns.
 */
import t, { type Test } from 'tap'
import {
  ADMIN_TOKEN,
  createTenant,
  errorBody,
  invalidate,
  ISO_RE,
  issueToken,
  leakedLogLines,
  rememberKeySecret,
  post,
  randomUUID,
  serverErrorCounts,
  snapshotRows,
  startApp,
  UUID_RE,
  verify,
  type Tenant,
} from '../../../support/helpers.js'
import { INVALID_ADMIN_TOKEN as INVALID_ADMIN, INVALID_API_CREDENTIALS as INVALID_CREDENTIALS } from '../../../support/spec-bodies.js'

const notFound = (what: string) => errorBody(404, `${what} not found`, 'NOT_FOUND')
const INVALID_DEFAULT_AGENT = errorBody(400, 'defaultAgentId must be an agent of this company', 'INVALID_DEFAULT_AGENT')

const node = await startApp(t)
const tenant = (name = 'Acme'): Promise<Tenant> => createTenant(node, name)

/** An answer of a change without its receipt (SPEC §10.2), which must be the embedded store's: one node, acknowledged by itself. */
function receipted(t: Test, body: Record<string, unknown>): Record<string, unknown> {
  const { receipt, ...rest } = body
  t.match(receipt, { changeId: String, outcome: 'embedded', nodes: [{ nodeId: 'embedded', ackedAfterMs: Number, sessionsEnded: 0 }] }, 'the answer has its receipt')
  return rest
}

async function get(url: string) {
  const response = await node.admin('GET', url)
  if (response.statusCode !== 200) throw new Error(`GET ${url}: ${response.statusCode} ${response.body}`)
  return response.json()
}

t.test('without the admin token every admin call is a 401, and changes nothing', async (t) => {
  const acme = await tenant()
  const user = await issueToken(node, acme, 'user-1')
  const calls: Array<[string, string, unknown?]> = [
    ['POST', '/admin/v1/companies', { name: 'Intruder' }],
    ['GET', `/admin/v1/companies/${acme.companyId}`],
    ['PATCH', `/admin/v1/companies/${acme.companyId}`, { name: 'Renamed' }],
    ['POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'Intruder agent' }],
    ['PATCH', `/admin/v1/agents/${acme.agentId}`, { active: false }],
    ['POST', `/admin/v1/companies/${acme.companyId}/api-keys`, { name: 'stolen' }],
    ['GET', `/admin/v1/companies/${acme.companyId}/api-keys`],
    ['DELETE', `/admin/v1/api-keys/${acme.keyId}`],
    ['GET', `/admin/v1/customer-users/${user.user.id}`],
    ['PATCH', `/admin/v1/customer-users/${user.user.id}`, { active: false }],
    ['GET', '/admin/v1/no-such-thing'],
    ['DELETE', '/admin/v1/companies'],
    ['GET', '/admin/v1'],
  ]
  const authorizations: Array<[string, Record<string, string>]> = [
    ['no Authorization', {}],
    ['a wrong token', { authorization: 'Bearer wrong-admin-token-0123456789' }],
    ['the token with a suffix', { authorization: `Bearer ${ADMIN_TOKEN}x` }],
    ['a prefix of the token', { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` }],
    ['the token as Basic', { authorization: `Basic ${ADMIN_TOKEN}` }],
    ['the token without a scheme', { authorization: ADMIN_TOKEN }],
    ['an API key secret', { authorization: `Bearer ${acme.keySecret}` }],
    ['a customer JWT', { authorization: `Bearer ${user.token}` }],
    ['Bearer and nothing', { authorization: 'Bearer ' }],
  ]
  const rows = await snapshotRows(node)
  // Each attempt from its own address: from one address, failures past the limit answer 429 (failure-limits.test.ts).
  let attempt = 0
  for (const [method, url, payload] of calls) {
    for (const [label, headers] of authorizations) {
      const remoteAddress = `10.77.${Math.floor(++attempt / 250)}.${attempt % 250}`
      const response = await node.inject({ method: method as 'GET', url, headers, remoteAddress, ...(payload === undefined ? {} : { payload: payload as object }) })
      t.equal(response.statusCode, 401, `${method} ${url}, ${label}`)
      t.strictSame(response.json(), INVALID_ADMIN, `${method} ${url}, ${label}`)
      t.equal(response.headers['www-authenticate'], 'Bearer realm="admin"', `${method} ${url}, ${label}`)
    }
  }
  t.equal(await snapshotRows(node), rows, 'no row changed')
  t.equal((await verify(node, user.token)).statusCode, 200, 'the user and agent are still active')

  const lower = await node.inject({ method: 'GET', url: `/admin/v1/companies/${acme.companyId}`, headers: { authorization: `bearer ${ADMIN_TOKEN}` } })
  t.equal(lower.statusCode, 200, 'the scheme is case-insensitive')
})

t.test('with the admin token, an unknown admin path is a 404 ROUTE_NOT_FOUND', async (t) => {
  for (const [method, url] of [
    ['GET', '/admin/v1/no-such-thing'],
    ['DELETE', '/admin/v1/companies'],
    ['PUT', '/admin/v1/companies'],
    ['GET', '/admin/v1/agents'],
    ['GET', '/admin/v1/agents/00000000-0000-4000-8000-000000000000'],
    ['POST', '/admin/v2/companies'],
  ] as const) {
    const response = await node.admin(method, url)
    t.equal(response.statusCode, 404, `${method} ${url}`)
    t.strictSame(response.json(), errorBody(404, `Route ${method} ${url} not found`, 'ROUTE_NOT_FOUND'), `${method} ${url}`)
  }
})

t.test('companies: create, read, rename', async (t) => {
  const created = await node.admin('POST', '/admin/v1/companies', { name: 'Globex ☂ Ltd' })
  t.equal(created.statusCode, 201)
  t.match(created.headers['content-type'], /^application\/json/)
  const company = created.json()
  t.match(company.id, UUID_RE)
  t.match(company.createdAt, ISO_RE)
  t.strictSame(company, { id: company.id, name: 'Globex ☂ Ltd', defaultAgentId: null, createdAt: company.createdAt })
  t.strictSame(await get(`/admin/v1/companies/${company.id}`), company)
  t.strictSame(await get(`/admin/v1/companies/${company.id.toUpperCase()}`), company, 'an upper-case uuid names the same company')

  const renamed = await node.admin('PATCH', `/admin/v1/companies/${company.id}`, { name: 'Globex' })
  t.equal(renamed.statusCode, 200)
  t.strictSame(renamed.json(), { ...company, name: 'Globex' })
  const unchanged = await node.admin('PATCH', `/admin/v1/companies/${company.id}`, {})
  t.equal(unchanged.statusCode, 200, 'an empty patch')
  t.strictSame(unchanged.json(), { ...company, name: 'Globex' })
  t.strictSame(await get(`/admin/v1/companies/${company.id}`), { ...company, name: 'Globex' })
})

t.test('agents: the first becomes the default agent, the second does not', async (t) => {
  const company = (await node.admin('POST', '/admin/v1/companies', { name: 'Initech' })).json()
  const first = await node.admin('POST', `/admin/v1/companies/${company.id}/agents`, { name: 'First' })
  t.equal(first.statusCode, 201)
  const agent = first.json()
  t.match(agent.id, UUID_RE)
  t.match(agent.createdAt, ISO_RE)
  t.strictSame(agent, { id: agent.id, companyId: company.id, name: 'First', active: true, createdAt: agent.createdAt })
  t.equal((await get(`/admin/v1/companies/${company.id}`)).defaultAgentId, agent.id, 'the first agent is the default')

  const second = await node.admin('POST', `/admin/v1/companies/${company.id}/agents`, { name: 'Second', active: false })
  t.equal(second.statusCode, 201)
  const secondAgent = second.json()
  t.strictSame(secondAgent, { id: secondAgent.id, companyId: company.id, name: 'Second', active: false, createdAt: secondAgent.createdAt })
  t.equal((await get(`/admin/v1/companies/${company.id}`)).defaultAgentId, agent.id, 'the second does not change it')

  const patched = await node.admin('PATCH', `/admin/v1/companies/${company.id}`, { defaultAgentId: secondAgent.id })
  t.equal(patched.statusCode, 200)
  t.strictSame(patched.json(), { id: company.id, name: 'Initech', defaultAgentId: secondAgent.id, createdAt: company.createdAt })
})

t.test('agents: the company\'s listing, by name then id (the console\'s Company page); 404 for an unknown company', async (t) => {
  const company = (await node.admin('POST', '/admin/v1/companies', { name: 'Listed agents' })).json()
  t.strictSame(await get(`/admin/v1/companies/${company.id}/agents`), [], 'none yet')
  const zed = (await node.admin('POST', `/admin/v1/companies/${company.id}/agents`, { name: 'Zed' })).json()
  const amy = (await node.admin('POST', `/admin/v1/companies/${company.id}/agents`, { name: 'Amy', active: false })).json()
  await node.admin('POST', `/admin/v1/companies/${(await tenant('Other')).companyId}/agents`, { name: 'Not theirs' })
  t.strictSame(await get(`/admin/v1/companies/${company.id}/agents`), [amy, zed], 'its own agents only, by name')
  for (const unknown of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
    const response = await node.admin('GET', `/admin/v1/companies/${unknown}/agents`)
    t.strictSame([response.statusCode, response.json()], [404, errorBody(404, 'Company not found', 'NOT_FOUND')], unknown)
  }
})

t.test('agents: PATCH name and active', async (t) => {
  const acme = await tenant()
  const original = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'Patchable' })).json()
  const renamed = await node.admin('PATCH', `/admin/v1/agents/${original.id}`, { name: 'Renamed' })
  t.equal(renamed.statusCode, 200)
  t.strictSame(receipted(t, renamed.json()), { ...original, name: 'Renamed' })
  const deactivated = await node.admin('PATCH', `/admin/v1/agents/${original.id}`, { active: false })
  t.strictSame(receipted(t, deactivated.json()), { ...original, name: 'Renamed', active: false })
  const empty = await node.admin('PATCH', `/admin/v1/agents/${original.id}`, {})
  t.equal(empty.statusCode, 200)
  t.strictSame(receipted(t, empty.json()), { ...original, name: 'Renamed', active: false }, 'an empty patch changes nothing')
  const both = await node.admin('PATCH', `/admin/v1/agents/${original.id}`, { name: 'Both', active: true })
  t.strictSame(receipted(t, both.json()), { ...original, name: 'Both', active: true })
})

t.test('PATCH agent active false: its tokens are refused before the call returns, and accepted again after reactivation', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'agent-user')
  t.equal((await verify(node, issued.token)).statusCode, 200, 'control: accepted, and now cached')
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: false })).statusCode, 200)
  const refused = await verify(node, issued.token)
  t.equal(refused.statusCode, 401)
  t.strictSame(refused.json(), errorBody(401, 'Agent is inactive', 'AGENT_INACTIVE'))
  const stillIssued = await issueToken(node, acme, 'agent-user')
  t.strictSame(stillIssued.agent, { id: acme.agentId, name: acme.agentName, active: false }, 'the token endpoint shows the agent inactive')
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: true })).statusCode, 200)
  t.equal((await verify(node, issued.token)).statusCode, 200)
})

t.test('PATCH company defaultAgentId must name an agent of this company', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const before = await get(`/admin/v1/companies/${acme.companyId}`)
  const rows = await snapshotRows(node)
  for (const [label, defaultAgentId] of [
    ['another company\'s agent', other.agentId],
    ['an unknown uuid', randomUUID()],
    ['not a uuid', 'agent-1'],
  ] as Array<[string, string]>) {
    const response = await node.admin('PATCH', `/admin/v1/companies/${acme.companyId}`, { defaultAgentId, name: 'Must not be renamed' })
    t.equal(response.statusCode, 400, label)
    t.strictSame(response.json(), INVALID_DEFAULT_AGENT, label)
  }
  t.strictSame(await get(`/admin/v1/companies/${acme.companyId}`), before, 'the company is unchanged, name included')
  t.equal(await snapshotRows(node), rows, 'no row changed')
})

t.test('api keys: the secret is shown once; the list shows metadata only; revocation is idempotent', async (t) => {
  const acme = await tenant()
  const named = await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, { name: 'backend' })
  t.equal(named.statusCode, 201)
  const key = named.json()
  t.match(key.keyId, /^ak_[A-Za-z0-9_-]+$/)
  t.match(key.keySecret, /^sk_[A-Za-z0-9_-]+$/)
  t.ok(Buffer.from(key.keySecret.slice(3), 'base64url').length >= 32, 'the secret carries at least 32 random bytes')
  t.match(key.createdAt, ISO_RE)
  t.strictSame(key, { keyId: key.keyId, keySecret: key.keySecret, companyId: acme.companyId, name: 'backend', createdAt: key.createdAt })

  const unnamed = await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, {})
  t.equal(unnamed.statusCode, 201)
  const anonymous = unnamed.json()
  t.equal(anonymous.name, null, 'no name: null')
  t.not(anonymous.keyId, key.keyId)
  t.not(anonymous.keySecret, key.keySecret)

  const list = await node.admin('GET', `/admin/v1/companies/${acme.companyId}/api-keys`)
  t.equal(list.statusCode, 200)
  const items = list.json() as Array<Record<string, unknown>>
  t.equal(items.length, 3, 'the tenant\'s key and the two new ones')
  for (const item of items) {
    t.strictSame(Object.keys(item).sort(), ['createdAt', 'keyId', 'lastUsedAt', 'name', 'revokedAt'])
    t.equal(item.revokedAt, null)
    t.ok(item.lastUsedAt === null || ISO_RE.test(item.lastUsedAt as string), 'lastUsedAt is null or a time')
  }
  const byId = new Map(items.map((item) => [item.keyId, item]))
  t.strictSame(byId.get(key.keyId), { keyId: key.keyId, name: 'backend', createdAt: key.createdAt, revokedAt: null, lastUsedAt: byId.get(key.keyId)!.lastUsedAt })
  t.strictSame(byId.get(anonymous.keyId), { keyId: anonymous.keyId, name: null, createdAt: anonymous.createdAt, revokedAt: null, lastUsedAt: byId.get(anonymous.keyId)!.lastUsedAt })
  for (const secret of [acme.keySecret, key.keySecret, anonymous.keySecret]) t.notOk(list.body.includes(secret), 'no secret in the list')
  t.notOk(list.body.includes('Secret') || list.body.includes('secret') || list.body.includes('hash'), 'no secret field in the list')

  const other = await tenant('Other')
  const otherList = (await get(`/admin/v1/companies/${other.companyId}/api-keys`)) as Array<{ keyId: string }>
  t.strictSame(otherList.map((item) => item.keyId), [other.keyId], 'another company lists only its own key')

  const revoked = await node.admin('DELETE', `/admin/v1/api-keys/${key.keyId}`)
  t.equal(revoked.statusCode, 200)
  const revocation = revoked.json()
  t.match(revocation.revokedAt, ISO_RE)
  t.strictSame(receipted(t, revocation), { keyId: key.keyId, revokedAt: revocation.revokedAt })
  const again = await node.admin('DELETE', `/admin/v1/api-keys/${key.keyId}`)
  t.equal(again.statusCode, 200, 'revoking twice is fine')
  t.strictSame(receipted(t, again.json()), receipted(t, revocation), 'and keeps the first revocation time')
  const after = (await get(`/admin/v1/companies/${acme.companyId}/api-keys`)) as Array<Record<string, unknown>>
  t.equal(after.find((item) => item.keyId === key.keyId)!.revokedAt, revocation.revokedAt, 'the list shows revokedAt')
  t.equal(after.find((item) => item.keyId === anonymous.keyId)!.revokedAt, null, 'the other keys are not revoked')
})

t.test('POST api-keys without any body creates an unnamed key', async (t) => {
  // SPEC §4: the body is `{name?}`; the route declares it optional (Type.Optional, request.body?.name).
  const acme = await tenant()
  const response = await node.inject({ method: 'POST', url: `/admin/v1/companies/${acme.companyId}/api-keys`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.equal(response.statusCode, 201, response.body)
  rememberKeySecret(response.body)
  if (response.statusCode === 201) {
    t.equal(response.json().name, null)
  }
})

t.test('a revoked key is refused by token and invalidate at once; the company\'s other keys keep working', async (t) => {
  const acme = await tenant()
  const spare = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, { name: 'spare' })).json()
  const issued = await issueToken(node, acme, 'key-user')
  t.equal((await invalidate(node, acme, issued.user.id)).statusCode, 200, 'control: the key works, and is now cached')

  t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${acme.keyId}`)).statusCode, 200)
  const token = await post(node, '/rest/v1/auth/token', { keyId: acme.keyId, keySecret: acme.keySecret, userId: 'key-user' })
  t.equal(token.statusCode, 401)
  t.strictSame(token.json(), INVALID_CREDENTIALS)
  const inv = await invalidate(node, acme, issued.user.id)
  t.equal(inv.statusCode, 401)
  t.strictSame(inv.json(), INVALID_CREDENTIALS)

  const viaSpare = await issueToken(node, { ...acme, keyId: spare.keyId, keySecret: spare.keySecret }, 'key-user')
  t.equal(viaSpare.user.id, issued.user.id)
  t.equal((await verify(node, viaSpare.token)).statusCode, 200, 'tokens are not tied to the key that issued them')
})

t.test('customer users: read, deactivate, reactivate', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'admin-user')
  const user = await get(`/admin/v1/customer-users/${issued.user.id}`)
  t.match(user.createdAt, ISO_RE)
  t.strictSame(user, { id: issued.user.id, externalId: 'admin-user', companyId: acme.companyId, agentId: acme.agentId, tokenVersion: 0, active: true, createdAt: user.createdAt })

  t.equal((await verify(node, issued.token)).statusCode, 200, 'control: accepted, and now cached')
  const deactivated = await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })
  t.equal(deactivated.statusCode, 200)
  t.strictSame(receipted(t, deactivated.json()), { ...user, active: false })
  t.strictSame(await get(`/admin/v1/customer-users/${issued.user.id}`), { ...user, active: false })

  const refused = await verify(node, issued.token)
  t.equal(refused.statusCode, 401)
  t.strictSame(refused.json(), errorBody(401, 'Customer user not found or inactive', 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE'))
  const noToken = await post(node, '/rest/v1/auth/token', { keyId: acme.keyId, keySecret: acme.keySecret, userId: 'admin-user' })
  t.equal(noToken.statusCode, 403)
  t.strictSame(noToken.json(), errorBody(403, 'Customer user is inactive', 'CUSTOMER_USER_INACTIVE'))

  const again = await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })
  t.strictSame(receipted(t, again.json()), { ...user, active: false }, 'deactivating twice is fine')
  const reactivated = await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: true })
  t.strictSame(receipted(t, reactivated.json()), user, 'reactivated: as before, tokenVersion unchanged')
  t.equal((await verify(node, issued.token)).statusCode, 200)
  t.equal((await issueToken(node, acme, 'admin-user')).user.id, issued.user.id)
})

t.test('unknown and malformed ids are a 404 on every :param route, and change nothing', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'user-404')
  const unknownIds: Array<[string, string]> = [
    ['an unknown uuid', randomUUID()],
    ['the nil uuid', '00000000-0000-0000-0000-000000000000'],
    ['not a uuid', 'not-a-uuid'],
    ['a uuid with a trailing character', `${acme.companyId}0`],
    ['a uuid without dashes', acme.companyId.replaceAll('-', '')],
    ['an id with an encoded slash', 'a%2Fb'],
    ['an encoded space', '%20'],
    ['a 100-character id', 'a'.repeat(100)],
  ]
  const rows = await snapshotRows(node)
  for (const [label, id] of unknownIds) {
    for (const [method, url, what, payload] of paramRoutes(id, acme.agentId)) {
      const response = await node.admin(method as 'GET', url, payload)
      t.equal(response.statusCode, 404, `${method} ${url.slice(0, 80)} (${label})`)
      t.strictSame(response.json(), notFound(what), `${method} ${url.slice(0, 80)} (${label})`)
    }
  }

  // Ids of the wrong kind: an agent id where a company id is expected, and so on.
  for (const [method, url, what, payload] of [
    ['GET', `/admin/v1/companies/${acme.agentId}`, 'Company'],
    ['PATCH', `/admin/v1/agents/${acme.companyId}`, 'Agent', { name: 'x' }],
    ['GET', `/admin/v1/customer-users/${acme.companyId}`, 'Customer user'],
    ['DELETE', `/admin/v1/api-keys/${acme.companyId}`, 'API key'],
    ['GET', `/admin/v1/companies/${issued.user.id}/api-keys`, 'Company'],
  ] as Array<[string, string, string, unknown?]>) {
    const response = await node.admin(method as 'GET', url, payload)
    t.equal(response.statusCode, 404, `${method} ${url}`)
    t.strictSame(response.json(), notFound(what), `${method} ${url}`)
  }
  t.equal(await snapshotRows(node), rows, 'no row changed')
})

/** Every admin route with an :id parameter, with `id` in it, and the thing its 404 names. */
function paramRoutes(id: string, agentId: string): Array<[string, string, string, unknown?]> {
  return [
    ['GET', `/admin/v1/companies/${id}`, 'Company'],
    ['PATCH', `/admin/v1/companies/${id}`, 'Company', { name: 'x' }],
    ['PATCH', `/admin/v1/companies/${id}`, 'Company', { defaultAgentId: agentId }],
    ['POST', `/admin/v1/companies/${id}/agents`, 'Company', { name: 'x' }],
    ['PATCH', `/admin/v1/agents/${id}`, 'Agent', { active: false }],
    ['POST', `/admin/v1/companies/${id}/api-keys`, 'Company', { name: 'x' }],
    ['GET', `/admin/v1/companies/${id}/api-keys`, 'Company'],
    ['DELETE', `/admin/v1/api-keys/${id}`, 'API key'],
    ['GET', `/admin/v1/customer-users/${id}`, 'Customer user'],
    ['PATCH', `/admin/v1/customer-users/${id}`, 'Customer user', { active: false }],
  ]
}

t.test('an id longer than the router\'s parameter limit (100) is still a 404 with the SPEC error body', async (t) => {
  const acme = await tenant()
  for (const [method, url, what, payload] of paramRoutes('a'.repeat(150), acme.agentId)) {
    const response = await node.admin(method as 'GET', url, payload)
    t.equal(response.statusCode, 404, `${method} ${url.slice(0, 40)}…`)
    t.strictSame(response.json(), notFound(what), `${method} ${url.slice(0, 40)}…`)
  }
})

t.test('no request answered 5xx, and no secret or JWT reached the log', async (t) => {
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs), [])
  // The check bites: a key secret this file was shown, in a log line, is caught.
  const shown = (await node.admin('POST', `/admin/v1/companies/${(await tenant()).companyId}/api-keys`, {})).json()
  t.strictSame(leakedLogLines([`{"msg":"oops","value":"${shown.keySecret}"}`]), [`{"msg":"oops","value":"${shown.keySecret}"}`])
})
