/**
 * SPEC §3.1 POST /rest/v1/auth/token, black box: every field of the answer and of the
 * JWT, expiresIn, credentials, the agent rules, inactive users, isolation, concurrency.
 */
import t from 'tap'
import {
  countUsers,
  hs256Kid,
  createTenant,
  decodeToken,
  errorBody,
  forgeHs256,
  ISO_RE,
  issueToken,
  JWT_SECRET,
  leakedLogLines,
  post,
  randomUUID,
  serverErrorCounts,
  snapshotRows,
  startApp,
  UUID_RE,
  verify,
  type Tenant,
  type TestApp,
} from '../../../support/helpers.js'
import { AGENT_INACTIVE, INVALID_API_CREDENTIALS as INVALID_CREDENTIALS, INVALID_TOKEN } from '../../../support/spec-bodies.js'

const TOKEN_URL = '/rest/v1/auth/token'
const MALFORMED_EXPIRES_IN = errorBody(400, 'expiresIn must be a positive integer followed by m, h or d (for example 30m, 1h, 7d)', 'INVALID_EXPIRES_IN')
const AGENT_NOT_FOUND = errorBody(400, 'Agent not found or does not belong to your company', 'AGENT_NOT_FOUND')
const AGENT_REQUIRED = errorBody(400, 'agentId is required: the company has no default agent', 'AGENT_REQUIRED')
const USER_INACTIVE = errorBody(403, 'Customer user is inactive', 'CUSTOMER_USER_INACTIVE')
const SIGNING_KID = hs256Kid(JWT_SECRET)

const node = await startApp(t)
const tenant = (name = 'Acme'): Promise<Tenant> => createTenant(node, name)

function requestToken(target: TestApp, credentials: Pick<Tenant, 'keyId' | 'keySecret'>, body: Record<string, unknown>) {
  return post(target, TOKEN_URL, { keyId: credentials.keyId, keySecret: credentials.keySecret, ...body })
}

async function adminUser(target: TestApp, id: string) {
  const response = await target.admin('GET', `/admin/v1/customer-users/${id}`)
  if (response.statusCode !== 200) throw new Error(`admin GET customer-user ${id}: ${response.statusCode} ${response.body}`)
  return response.json()
}

async function addAgent(companyId: string, name: string, active?: boolean) {
  const response = await node.admin('POST', `/admin/v1/companies/${companyId}/agents`, active === undefined ? { name } : { name, active })
  if (response.statusCode !== 201) throw new Error(`agent: ${response.statusCode} ${response.body}`)
  return response.json() as { id: string; companyId: string; name: string; active: boolean; createdAt: string }
}

t.test('a first token creates the user with the default agent, a 24h lifetime and every field of SPEC §3.1', async (t) => {
  const acme = await tenant()
  const before = Date.now()
  const response = await requestToken(node, acme, { userId: 'user-1' })
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^application\/json/)
  const body = response.json()
  t.match(body.user.id, UUID_RE)
  t.strictSame(body, {
    token: body.token,
    user: { id: body.user.id, externalId: 'user-1', companyId: acme.companyId, agentId: acme.agentId },
    agent: { id: acme.agentId, name: acme.agentName, active: true },
    expiresAt: body.expiresAt,
  })
  t.match(body.expiresAt, ISO_RE)
  const lifetimeMs = Date.parse(body.expiresAt) - before
  t.ok(lifetimeMs > 24 * 3600_000 - 5000 && lifetimeMs <= 24 * 3600_000 + 1000, `expiresAt is 24h ahead (${lifetimeMs} ms)`)

  const { header, payload } = decodeToken(body.token)
  t.strictSame(header, { alg: 'HS256', typ: 'JWT', kid: SIGNING_KID })
  t.strictSame(Object.keys(payload).sort(), ['agen', 'agentId', 'cgen', 'companyId', 'exp', 'iat', 'jti', 'sub', 'tokenVersion'])
  t.equal(payload.sub, body.user.id)
  t.equal(payload.tokenVersion, 0)
  t.equal(payload.companyId, acme.companyId)
  t.equal(payload.agentId, acme.agentId)
  t.equal(typeof payload.jti, 'string')
  t.ok((payload.jti as string).length > 0, 'jti is not empty')
  t.ok(Math.abs((payload.iat as number) - Math.floor(before / 1000)) <= 2, 'iat is now')
  t.equal((payload.exp as number) - (payload.iat as number), 86400, 'exp = iat + 24h')
  t.equal(body.expiresAt, new Date((payload.exp as number) * 1000).toISOString(), 'expiresAt is the exp claim')

  const row = await adminUser(node, body.user.id)
  t.match(row.createdAt, ISO_RE)
  t.strictSame(row, { id: body.user.id, externalId: 'user-1', companyId: acme.companyId, agentId: acme.agentId, tokenVersion: 0, active: true, createdAt: row.createdAt })
  t.equal((await verify(node, body.token)).statusCode, 200, 'the token verifies')
})

t.test('the answer is exactly the JSON of its fields in the order of SPEC §3.1, whatever characters the customer chose', async (t) => {
  const acme = await tenant()
  const agent = await addAgent(acme.companyId, 'Bot "Ωmega" \\ \t 😀 \u2028')
  const userIds = ['user-10', 'quote " and \\ backslash', 'tab\tnew\nline\u0001', 'ünïcødé 😀 \u2028', ' ', 'x'.repeat(255)]
  for (const [i, userId] of userIds.entries()) {
    // twice: a new user (from the store), then a cached one
    for (const round of ['new', 'cached']) {
      const response = await requestToken(node, acme, { userId, agentId: agent.id })
      t.equal(response.statusCode, 200)
      t.equal(response.headers['content-type'], 'application/json; charset=utf-8')
      const body = response.json()
      const expected = {
        token: body.token,
        user: { id: body.user.id, externalId: userId, companyId: acme.companyId, agentId: agent.id },
        agent: { id: agent.id, name: agent.name, active: true },
        expiresAt: new Date(Number(decodeToken(body.token).payload.exp) * 1000).toISOString(),
      }
      t.equal(response.body, JSON.stringify(expected), `userId ${i}, ${round} user: the very bytes`)
      t.equal(response.headers['content-length'], String(Buffer.byteLength(response.body)))
    }
  }
})

t.test('a second token for the same user is the same user, with a distinct jti', async (t) => {
  const acme = await tenant()
  const first = await issueToken(node, acme, 'user-2')
  const second = await issueToken(node, acme, 'user-2')
  t.equal(second.user.id, first.user.id)
  t.not(decodeToken(second.token).payload.jti, decodeToken(first.token).payload.jti)
  t.equal(await countUsers(node, acme.companyId), 1)
  t.equal((await verify(node, first.token)).statusCode, 200, 'both tokens verify')
  t.equal((await verify(node, second.token)).statusCode, 200)
})

t.test('expiresIn takes minutes, hours and days up to the 30d maximum', async (t) => {
  const acme = await tenant()
  const cases: Array<[string, number]> = [
    ['1m', 60],
    ['30m', 1800],
    ['1h', 3600],
    ['24h', 86400],
    ['7d', 7 * 86400],
    ['30d', 30 * 86400],
    ['720h', 30 * 86400],
    ['43200m', 30 * 86400],
  ]
  for (const [expiresIn, seconds] of cases) {
    const response = await requestToken(node, acme, { userId: 'user-3', expiresIn })
    t.equal(response.statusCode, 200, expiresIn)
    const body = response.json()
    const { payload } = decodeToken(body.token)
    t.equal((payload.exp as number) - (payload.iat as number), seconds, `${expiresIn}: exp - iat`)
    t.equal(body.expiresAt, new Date((payload.exp as number) * 1000).toISOString(), `${expiresIn}: expiresAt`)
  }
})

t.test('a malformed expiresIn is a 400 naming expiresIn, and creates no user (a leading zero is malformed, like any other spelling)', async (t) => {
  const acme = await tenant()
  for (const expiresIn of ['0h', '0m', '10', 'h', '1w', '1s', '-1h', '+1h', '1.5h', ' 1h', '1h ', '1H', '1 h', '01h', '00001d', '030d', 'one hour', '1e3m', '1hh', '١h']) {
    const response = await requestToken(node, acme, { userId: 'user-4', expiresIn })
    t.equal(response.statusCode, 400, JSON.stringify(expiresIn))
    t.strictSame(response.json(), MALFORMED_EXPIRES_IN, JSON.stringify(expiresIn))
  }
  const empty = await requestToken(node, acme, { userId: 'user-4', expiresIn: '' })
  t.equal(empty.statusCode, 400, 'empty string')
  t.equal(empty.json().code, 'VALIDATION_ERROR')
  t.match(empty.json().message, /expiresIn/)
  t.equal(await countUsers(node, acme.companyId), 0, 'no user was created')
})

t.test('a lifetime above the default 30d maximum is a 400 naming expiresIn', async (t) => {
  const acme = await tenant()
  // Well-formed however many digits (up to the 32 characters of the field): over the limit, not malformed.
  for (const expiresIn of ['31d', '721h', '43201m', '999999999d', '1000000000m', '1000000000d', '9'.repeat(31) + 'h']) {
    const response = await requestToken(node, acme, { userId: 'user-5', expiresIn })
    t.equal(response.statusCode, 400, expiresIn)
    t.strictSame(response.json(), errorBody(400, 'expiresIn exceeds the maximum token lifetime of 30d', 'INVALID_EXPIRES_IN'), expiresIn)
  }
  t.equal(await countUsers(node, acme.companyId), 0, 'no user was created')
})

t.test('credentials: an unknown key, a wrong secret, a revoked key or another company\'s secret answer 401', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const revoked = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, { name: 'to revoke' })).json()
  t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${revoked.keyId}`)).statusCode, 200)

  const cases: Array<[string, { keyId: string; keySecret: string }]> = [
    ['unknown keyId', { keyId: 'ak_does_not_exist', keySecret: acme.keySecret }],
    ['wrong secret', { keyId: acme.keyId, keySecret: acme.keySecret + 'x' }],
    ['secret of another key', { keyId: acme.keyId, keySecret: other.keySecret }],
    ['revoked key', { keyId: revoked.keyId, keySecret: revoked.keySecret }],
  ]
  const rows = await snapshotRows(node)
  for (const [label, credentials] of cases) {
    const response = await requestToken(node, credentials, { userId: 'user-6' })
    t.equal(response.statusCode, 401, label)
    t.strictSame(response.json(), INVALID_CREDENTIALS, label)
  }
  t.equal(await snapshotRows(node), rows, 'no row changed')
})

t.test('credentials are checked before expiresIn and agentId', async (t) => {
  const acme = await tenant()
  const wrong = { keyId: acme.keyId, keySecret: 'sk_wrong' }
  const badExpiry = await requestToken(node, wrong, { userId: 'user-7', expiresIn: '1w' })
  t.equal(badExpiry.statusCode, 401)
  t.strictSame(badExpiry.json(), INVALID_CREDENTIALS)
  const badAgent = await requestToken(node, wrong, { userId: 'user-7', agentId: randomUUID() })
  t.equal(badAgent.statusCode, 401)
  t.strictSame(badAgent.json(), INVALID_CREDENTIALS)
  const tooLong = await requestToken(node, wrong, { userId: 'user-7', expiresIn: '365d' })
  t.equal(tooLong.statusCode, 401)
  t.strictSame(tooLong.json(), INVALID_CREDENTIALS)
})

t.test('an explicit agentId ties the user to that agent, and later tokens without agentId keep it', async (t) => {
  const acme = await tenant()
  const second = await addAgent(acme.companyId, 'Second agent')
  const first = await issueToken(node, acme, 'user-8')
  t.equal(first.user.agentId, acme.agentId, 'a new user starts with the default agent')

  const tied = await requestToken(node, acme, { userId: 'user-8', agentId: second.id })
  t.equal(tied.statusCode, 200)
  const body = tied.json()
  t.strictSame(body.user, { id: first.user.id, externalId: 'user-8', companyId: acme.companyId, agentId: second.id })
  t.strictSame(body.agent, { id: second.id, name: 'Second agent', active: true })
  t.equal(decodeToken(body.token).payload.agentId, second.id)
  t.equal((await adminUser(node, first.user.id)).agentId, second.id, 'the row now names the agent')

  const later = await issueToken(node, acme, 'user-8')
  t.strictSame(later.agent, { id: second.id, name: 'Second agent', active: true }, 'no agentId: the tied agent')
  t.equal(later.user.agentId, second.id)

  const back = await issueToken(node, acme, 'user-8', { agentId: acme.agentId })
  t.equal(back.user.agentId, acme.agentId, 'tied back to the first agent')
  t.equal((await adminUser(node, first.user.id)).agentId, acme.agentId)
  t.equal((await adminUser(node, first.user.id)).tokenVersion, 0, 'retying does not revoke')
})

t.test('a new user with an explicit agentId is created with that agent', async (t) => {
  const acme = await tenant()
  const second = await addAgent(acme.companyId, 'Second agent')
  const issued = await issueToken(node, acme, 'user-9', { agentId: second.id })
  t.equal(issued.user.agentId, second.id)
  t.equal((await adminUser(node, issued.user.id)).agentId, second.id)
})

t.test('a company without any agent: 400 agentId is required, and no user', async (t) => {
  const company = (await node.admin('POST', '/admin/v1/companies', { name: 'No agents' })).json()
  const key = (await node.admin('POST', `/admin/v1/companies/${company.id}/api-keys`, {})).json()
  const response = await requestToken(node, key, { userId: 'user-10' })
  t.equal(response.statusCode, 400)
  t.strictSame(response.json(), AGENT_REQUIRED)
  t.equal(await countUsers(node, company.id), 0)
})

t.test('an agentId that is not one of the company\'s agents is a 400, and changes nothing', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const existing = await issueToken(node, acme, 'user-11')
  const rows = await snapshotRows(node)
  const cases: Array<[string, string]> = [
    ['another company\'s agent', other.agentId],
    ['an unknown uuid', randomUUID()],
    ['not a uuid', 'agent-1'],
    ['a uuid with trailing text', `${acme.agentId}x`],
  ]
  for (const [label, agentId] of cases) {
    for (const userId of ['user-11', 'user-11-new']) {
      const response = await requestToken(node, acme, { userId, agentId })
      t.equal(response.statusCode, 400, `${label}, ${userId}`)
      t.strictSame(response.json(), AGENT_NOT_FOUND, `${label}, ${userId}`)
    }
  }
  t.equal(await snapshotRows(node), rows, 'no row changed: no new user, no retied user')
  t.equal((await adminUser(node, existing.user.id)).agentId, acme.agentId)
})

t.test('an inactive agent still gets a token that verification refuses until it is reactivated', async (t) => {
  const acme = await tenant()
  const sleeping = await addAgent(acme.companyId, 'Sleeping agent', false)
  t.equal(sleeping.active, false)
  const response = await requestToken(node, acme, { userId: 'user-12', agentId: sleeping.id })
  t.equal(response.statusCode, 200)
  const body = response.json()
  t.strictSame(body.agent, { id: sleeping.id, name: 'Sleeping agent', active: false })
  t.equal(body.user.agentId, sleeping.id)

  const refused = await verify(node, body.token)
  t.equal(refused.statusCode, 401)
  t.strictSame(refused.json(), AGENT_INACTIVE)
  t.equal(refused.headers['www-authenticate'], 'Bearer error="invalid_token"')

  t.equal((await node.admin('PATCH', `/admin/v1/agents/${sleeping.id}`, { active: true })).statusCode, 200)
  const accepted = await verify(node, body.token)
  t.equal(accepted.statusCode, 200, 'accepted once the agent is active')
  t.equal(accepted.json().agent.active, true)

  t.equal((await node.admin('PATCH', `/admin/v1/agents/${sleeping.id}`, { active: false })).statusCode, 200)
  const tiedInactive = await issueToken(node, acme, 'user-12')
  t.strictSame(tiedInactive.agent, { id: sleeping.id, name: 'Sleeping agent', active: false }, 'without agentId: the tied agent, inactive')
  t.strictSame((await verify(node, tiedInactive.token)).json(), AGENT_INACTIVE)
})

t.test('PATCH company defaultAgentId changes the agent of new users only', async (t) => {
  const acme = await tenant()
  const existing = await issueToken(node, acme, 'user-13-old')
  const second = await addAgent(acme.companyId, 'New default')
  const patched = await node.admin('PATCH', `/admin/v1/companies/${acme.companyId}`, { defaultAgentId: second.id })
  t.equal(patched.statusCode, 200)
  t.equal(patched.json().defaultAgentId, second.id)

  const fresh = await issueToken(node, acme, 'user-13-new')
  t.equal(fresh.user.agentId, second.id, 'a new user gets the new default')
  t.strictSame(fresh.agent, { id: second.id, name: 'New default', active: true })
  const old = await issueToken(node, acme, 'user-13-old')
  t.equal(old.user.agentId, acme.agentId, 'an existing user keeps its agent')
  t.equal(old.user.id, existing.user.id)
})

t.test('an inactive customer user gets 403 and no token, and its row does not change', async (t) => {
  const acme = await tenant()
  const second = await addAgent(acme.companyId, 'Second agent')
  const issued = await issueToken(node, acme, 'user-14')
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })).statusCode, 200)
  const before = await adminUser(node, issued.user.id)
  t.equal(before.active, false)
  const rows = await snapshotRows(node)

  for (const extra of [{}, { agentId: second.id }, { agentId: acme.agentId }, { expiresIn: '1h' }]) {
    const response = await requestToken(node, acme, { userId: 'user-14', ...extra })
    t.equal(response.statusCode, 403, JSON.stringify(extra))
    t.strictSame(response.json(), USER_INACTIVE, JSON.stringify(extra))
  }
  t.strictSame(await adminUser(node, issued.user.id), before, 'the row is unchanged, agentId included')
  t.equal(await snapshotRows(node), rows, 'no row changed')

  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: true })).statusCode, 200)
  const again = await issueToken(node, acme, 'user-14')
  t.equal(again.user.id, issued.user.id, 'reactivated: the same user gets tokens again')
  t.equal((await verify(node, again.token)).statusCode, 200)
  t.equal((await verify(node, issued.token)).statusCode, 200, 'the token issued before deactivation is good again')
})

t.test('userIds are compared exactly as sent: the NFC and NFD spellings of one name are two users', async (t) => {
  // A documented choice (docs/decisions.md, "Text"): ids are the customer's, opaque; normalising would
  // merge two users of a customer whose own system does not normalise.
  const acme = await tenant('Unicode')
  const composed = 'Jos\u00e9' // é as one code point
  const decomposed = 'Jose\u0301' // e + combining acute accent
  t.equal(composed.normalize('NFC'), decomposed.normalize('NFC'), 'one name in two spellings')
  const a = await issueToken(node, acme, composed)
  const b = await issueToken(node, acme, decomposed)
  t.not(a.user.id, b.user.id, 'two users')
  t.strictSame(a.user, { id: a.user.id, externalId: composed, companyId: acme.companyId, agentId: acme.agentId })
  t.strictSame(b.user, { id: b.user.id, externalId: decomposed, companyId: acme.companyId, agentId: acme.agentId })
  t.equal((await issueToken(node, acme, composed)).user.id, a.user.id, 'each spelling finds its own user again')
  t.equal((await issueToken(node, acme, decomposed)).user.id, b.user.id, 'each spelling finds its own user again')
  t.equal((await adminUser(node, a.user.id)).externalId, composed, 'stored as sent')
  t.equal((await adminUser(node, b.user.id)).externalId, decomposed, 'stored as sent')
  t.equal((await verify(node, b.token)).json().user.externalId, decomposed)
})

t.test('the same userId under two companies is two users', async (t) => {
  const acme = await tenant('Acme')
  const other = await tenant('Other')
  const a = await issueToken(node, acme, 'shared-user')
  const b = await issueToken(node, other, 'shared-user')
  t.not(a.user.id, b.user.id)
  t.strictSame(a.user, { id: a.user.id, externalId: 'shared-user', companyId: acme.companyId, agentId: acme.agentId })
  t.strictSame(b.user, { id: b.user.id, externalId: 'shared-user', companyId: other.companyId, agentId: other.agentId })
  t.equal((await adminUser(node, a.user.id)).companyId, acme.companyId)
  t.equal((await adminUser(node, b.user.id)).companyId, other.companyId)
  t.equal((await verify(node, a.token)).json().user.companyId, acme.companyId)
  t.equal((await verify(node, b.token)).json().user.companyId, other.companyId)
})

t.test('userId is case- and whitespace-sensitive: each distinct string is its own user', async (t) => {
  const acme = await tenant()
  const ids = new Set<string>()
  for (const userId of ['Alice', 'alice', ' alice', 'alice ']) ids.add((await issueToken(node, acme, userId)).user.id)
  t.equal(ids.size, 4)
  t.equal(await countUsers(node, acme.companyId), 4)
})

t.test('25 concurrent first requests for one new userId create exactly one user', async (t) => {
  const acme = await tenant()
  const responses = await Promise.all(Array.from({ length: 25 }, () => requestToken(node, acme, { userId: 'racer' })))
  t.strictSame(
    responses.map((r) => r.statusCode),
    Array(25).fill(200),
    'every request got a token',
  )
  const ids = new Set(responses.map((r) => r.json().user.id))
  t.equal(ids.size, 1, 'one user id in every answer')
  const [id] = [...ids]
  t.equal(await countUsers(node, acme.companyId), 1)
  const user = await adminUser(node, id!)
  t.equal(user.externalId, 'racer')
  t.equal(user.tokenVersion, 0)
  for (const response of responses) t.equal((await verify(node, response.json().token)).statusCode, 200)
})

t.test('with TOKEN_MAX_TTL=1h, JWT_ISSUER and JWT_AUDIENCE', async (t) => {
  const issuer = 'https://auth.example.test'
  const audience = 'chat.example.test'
  const configured = await startApp(t, { TOKEN_MAX_TTL: '1h', JWT_ISSUER: issuer, JWT_AUDIENCE: audience })
  const acme = await createTenant(configured)

  t.test('lifetimes up to 1h are accepted, longer ones refused naming the 1h maximum', async (t) => {
    for (const [expiresIn, seconds] of [['1h', 3600], ['60m', 3600], ['1m', 60]] as const) {
      const response = await requestToken(configured, acme, { userId: 'ttl-user', expiresIn })
      t.equal(response.statusCode, 200, expiresIn)
      const { payload } = decodeToken(response.json().token)
      t.equal((payload.exp as number) - (payload.iat as number), seconds, expiresIn)
    }
    for (const expiresIn of ['61m', '2h', '1d', '30d']) {
      const response = await requestToken(configured, acme, { userId: 'ttl-user', expiresIn })
      t.equal(response.statusCode, 400, expiresIn)
      t.strictSame(response.json(), errorBody(400, 'expiresIn exceeds the maximum token lifetime of 1h', 'INVALID_EXPIRES_IN'), expiresIn)
    }
  })

  t.test('without expiresIn, the default 24h is capped at the configured maximum', async (t) => {
    // SPEC: default 24h, and no lifetime above the configured maximum; the service caps the default.
    const response = await requestToken(configured, acme, { userId: 'ttl-default' })
    t.equal(response.statusCode, 200)
    const { payload } = decodeToken(response.json().token)
    t.equal((payload.exp as number) - (payload.iat as number), 3600, 'exp - iat = TOKEN_MAX_TTL')
  })

  t.test('the token carries iss and aud, and verifies', async (t) => {
    const issued = await issueToken(configured, acme, 'iss-user', { expiresIn: '30m' })
    const { payload } = decodeToken(issued.token)
    t.strictSame(Object.keys(payload).sort(), ['agen', 'agentId', 'aud', 'cgen', 'companyId', 'exp', 'iat', 'iss', 'jti', 'sub', 'tokenVersion'])
    t.equal(payload.iss, issuer)
    t.equal(payload.aud, audience)
    t.equal((await verify(configured, issued.token)).statusCode, 200)
  })

  t.test('a token signed with the right key but without, or with the wrong, iss or aud is an Invalid token', async (t) => {
    const issued = await issueToken(configured, acme, 'iss-user-2', { expiresIn: '30m' })
    const { header, payload } = decodeToken(issued.token)
    const { iss: _iss, aud: _aud, ...bare } = payload
    const cases: Array<[string, Record<string, unknown>]> = [
      ['no iss', { ...bare, aud: audience }],
      ['wrong iss', { ...payload, iss: 'https://evil.example.test' }],
      ['no aud', { ...bare, iss: issuer }],
      ['wrong aud', { ...payload, aud: 'other-audience' }],
      ['neither', bare],
    ]
    t.equal((await verify(configured, forgeHs256(header, payload))).statusCode, 200, 'control: the forger reproduces a good token')
    for (const [label, claims] of cases) {
      const response = await verify(configured, forgeHs256(header, claims))
      t.equal(response.statusCode, 401, label)
      t.strictSame(response.json(), INVALID_TOKEN, label)
    }
    const plain = await issueToken(node, await tenant('No issuer'), 'plain-user')
    t.strictSame((await verify(configured, plain.token)).json(), INVALID_TOKEN, 'a token of a node without iss/aud (other store, same key) is refused')
  })

  t.test('no secret reached this node\'s log', async (t) => {
    t.strictSame(leakedLogLines(configured.logs), [])
  })
})

t.test('no request answered 5xx, and no secret or JWT reached the log', async (t) => {
  // A few failing requests that carry secrets, so the log is exercised on the error paths.
  const acme = await tenant()
  await post(node, TOKEN_URL, `{"keyId":"${acme.keyId}","keySecret":"${acme.keySecret}",`, { 'content-type': 'application/json' })
  await requestToken(node, acme, { userId: 'x'.repeat(300) })
  await requestToken(node, { keyId: acme.keyId, keySecret: acme.keySecret + 'x' }, { userId: 'log-user' })
  const issued = await issueToken(node, acme, 'log-user')
  await verify(node, issued.token + 'x')
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs), [])
})
