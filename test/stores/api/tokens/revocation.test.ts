/**
 * Wider revocation, black box: `POST /rest/v1/auth/revoke-token` (one token, by its jti),
 * `POST /admin/v1/companies/:companyId/revoke-tokens` and
 * `POST /admin/v1/agents/:agentId/revoke-tokens` — each answer, its effect on verification
 * (refused at check 4, and nothing else refused), the refusals (which change nothing),
 * idempotency, tokens signed after a revoke (even in the same second), and a revoked jti
 * kept until its token's exp, then forgotten.
 */
import t from 'tap'
import {
  createTenant,
  decodeToken,
  errorBody,
  forgeHs256,
  hs256Kid,
  ISO_RE,
  issueToken,
  leakedLogLines,
  nowSeconds,
  post,
  randomUUID,
  serverErrorCounts,
  snapshotRows,
  startApp,
  verify,
  type Tenant,
} from '../../../support/helpers.js'
import { sleep } from '../../../support/poll.js'
import { INVALID_ADMIN_TOKEN, INVALID_API_CREDENTIALS, TOKEN_REVOKED } from '../../../support/spec-bodies.js'

const TOKEN_NOT_FOUND = errorBody(400, 'Token not found or does not belong to your company', 'TOKEN_NOT_FOUND')
const notFound = (what: string) => errorBody(404, `${what} not found`, 'NOT_FOUND')

const node = await startApp(t)
const tenant = (name = 'Acme'): Promise<Tenant> => createTenant(node, name)
const revokeToken = (key: Pick<Tenant, 'keyId' | 'keySecret'>, token: unknown) =>
  post(node, '/rest/v1/auth/revoke-token', { keyId: key.keyId, keySecret: key.keySecret, token })
const accepted = async (token: string) => (await verify(node, token)).statusCode === 200

t.test('revoke-token answers 200, refuses that token at check 4, and no other token of the user', async (t) => {
  const acme = await tenant()
  const phone = await issueToken(node, acme, 'alice')
  const laptop = await issueToken(node, acme, 'alice')
  t.ok(await accepted(phone.token), 'control: the token verifies before')

  const response = await revokeToken(acme, phone.token)
  t.equal(response.statusCode, 200)
  const { jti, exp } = decodeToken(phone.token).payload as { jti: string; exp: number }
  t.strictSame(response.json(), { message: 'Token revoked successfully', jti, expiresAt: new Date(exp * 1000).toISOString() })
  t.match(response.json().expiresAt, ISO_RE)
  t.equal(response.json().expiresAt, phone.expiresAt, 'the token\'s own expiry')

  const refused = await verify(node, phone.token)
  t.equal(refused.statusCode, 401)
  t.strictSame(refused.json(), TOKEN_REVOKED)
  t.equal(refused.headers['www-authenticate'], 'Bearer error="invalid_token"')
  t.ok(await accepted(laptop.token), 'the other device of the same user stays logged in')
  t.ok(await accepted((await issueToken(node, acme, 'alice')).token), 'a new token of the user is valid')
})

t.test('revoke-token is idempotent: a revoked or expired token answers 200 again', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'bob')
  const first = await revokeToken(acme, issued.token)
  const second = await revokeToken(acme, issued.token)
  t.equal(first.statusCode, 200)
  t.equal(second.statusCode, 200)
  t.strictSame(second.json(), first.json())
  t.strictSame((await verify(node, issued.token)).json(), TOKEN_REVOKED, 'still revoked')

  // An expired token of ours (signed with the node's key, as the service signs it).
  const { payload } = decodeToken(issued.token)
  const expired = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...payload, jti: randomUUID(), iat: nowSeconds() - 120, exp: nowSeconds() - 60 })
  const before = await snapshotRows(node)
  const answer = await revokeToken(acme, expired)
  t.equal(answer.statusCode, 200)
  t.equal(answer.json().message, 'Token revoked successfully')
  t.equal(await snapshotRows(node), before, 'nothing to keep for a token that is already refused at check 2')
})

t.test('a bad signature, another company\'s token or no token at all is a 400, and nothing changes', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const own = await issueToken(node, acme, 'carol')
  const foreign = await issueToken(node, other, 'dave')
  const [header, payload] = own.token.split('.')
  const cases: Array<[string, string]> = [
    ['another company\'s token', foreign.token],
    ['a tampered signature', `${header}.${payload}.${'A'.repeat(43)}`],
    ['a token signed with another key', forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, decodeToken(own.token).payload, 'x'.repeat(48))],
    ['not a JWT', 'not-a-jwt'],
    ['alg none', `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`],
  ]
  const before = await snapshotRows(node)
  for (const [name, token] of cases) {
    const response = await revokeToken(acme, token)
    t.equal(response.statusCode, 400, name)
    t.strictSame(response.json(), TOKEN_NOT_FOUND, name)
  }
  t.equal(await snapshotRows(node), before, 'no row changed')
  t.ok(await accepted(own.token), 'the company\'s own token is untouched')
  t.ok(await accepted(foreign.token), 'the other company\'s token is untouched')

  for (const body of [{ keyId: acme.keyId, keySecret: acme.keySecret }, { keyId: acme.keyId, keySecret: acme.keySecret, token: '' }, { keyId: acme.keyId, keySecret: acme.keySecret, token: 42 }]) {
    const response = await post(node, '/rest/v1/auth/revoke-token', body)
    t.equal(response.statusCode, 400, JSON.stringify(body))
    t.equal(response.json().statusCode, 400)
    t.type(response.json().code, 'string')
  }
  t.equal(await snapshotRows(node), before, 'still no row changed')
})

t.test('revoke-token with bad credentials is a 401, and nothing changes', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'erin')
  const before = await snapshotRows(node)
  for (const key of [{ keyId: acme.keyId, keySecret: 'wrong'.repeat(8) }, { keyId: 'ak_unknown', keySecret: acme.keySecret }]) {
    const response = await revokeToken(key, issued.token)
    t.equal(response.statusCode, 401)
    t.strictSame(response.json(), INVALID_API_CREDENTIALS)
  }
  t.equal(await snapshotRows(node), before)
  t.ok(await accepted(issued.token))
})

t.test('a revoked jti is kept until its token expires, then forgotten', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'frank')
  const { payload } = decodeToken(issued.token)
  const jti = randomUUID()
  const shortLived = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...payload, jti, iat: nowSeconds(), exp: nowSeconds() + 2 })
  t.ok(await accepted(shortLived), 'control: a token of ours')
  t.equal((await revokeToken(acme, shortLived)).statusCode, 200)
  t.strictSame((await verify(node, shortLived)).json(), TOKEN_REVOKED)
  const rows = () => node.gateway.db.query('SELECT jti FROM revoked_token WHERE jti = $1', [jti])
  t.equal((await rows()).length, 1, 'kept in the store')
  t.equal(await node.gateway.store.pruneRevokedTokens(0), 0, 'not pruned while the token lives')
  await sleep(3000)
  t.ok((await node.gateway.store.pruneRevokedTokens(0)) >= 1, 'pruned once the token expired')
  t.equal((await rows()).length, 0, 'forgotten')
})

t.test('a node that starts after a revocation learns it from the store', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'grace')
  t.equal((await revokeToken(acme, issued.token)).statusCode, 200)
  const late = await startApp(t, {}, { db: node.gateway.db })
  t.strictSame((await verify(late, issued.token)).json(), TOKEN_REVOKED)
})

t.test('company revoke-tokens: 200, every token of the company refused, later ones valid, other companies untouched', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const second = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'second' })).json()
  const tokens = [await issueToken(node, acme, 'u1'), await issueToken(node, acme, 'u2', { agentId: second.id })]
  const bystander = await issueToken(node, other, 'u1')

  const response = await node.admin('POST', `/admin/v1/companies/${acme.companyId}/revoke-tokens`)
  t.equal(response.statusCode, 200)
  t.strictSame(Object.keys(response.json()).sort(), ['companyId', 'receipt', 'revokedAt'])
  t.equal(response.json().companyId, acme.companyId)
  t.match(response.json().revokedAt, ISO_RE)
  for (const issued of tokens) t.strictSame((await verify(node, issued.token)).json(), TOKEN_REVOKED)
  t.ok(await accepted(bystander.token), 'another company\'s token stays valid')

  // Issued right after the answer, most likely in the same second: valid.
  const fresh = await issueToken(node, acme, 'u1')
  t.ok(await accepted(fresh.token), 'a token issued after the revoke is valid')
  const freshOther = await issueToken(node, acme, 'u2', { agentId: second.id })
  t.ok(await accepted(freshOther.token))

  const again = await node.admin('POST', `/admin/v1/companies/${acme.companyId.toUpperCase()}/revoke-tokens`)
  t.equal(again.statusCode, 200, 'an id in upper case names the same company')
  t.equal(again.json().companyId, acme.companyId)
  t.strictSame((await verify(node, fresh.token)).json(), TOKEN_REVOKED, 'a second revoke refuses the tokens of the first interval')
})

t.test('agent revoke-tokens: 200, the agent\'s tokens refused, the other agents\' not, later ones valid', async (t) => {
  const acme = await tenant()
  const bot = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'bot' })).json()
  const ofBot = await issueToken(node, acme, 'h1', { agentId: bot.id })
  const ofDefault = await issueToken(node, acme, 'h2')

  const response = await node.admin('POST', `/admin/v1/agents/${bot.id}/revoke-tokens`)
  t.equal(response.statusCode, 200)
  t.strictSame(Object.keys(response.json()).sort(), ['agentId', 'receipt', 'revokedAt'])
  t.equal(response.json().agentId, bot.id)
  t.match(response.json().revokedAt, ISO_RE)
  t.strictSame((await verify(node, ofBot.token)).json(), TOKEN_REVOKED)
  t.ok(await accepted(ofDefault.token), 'another agent\'s token stays valid')
  const fresh = await issueToken(node, acme, 'h1', { agentId: bot.id })
  t.ok(await accepted(fresh.token), 'a token issued after the revoke is valid')
  const agent = await node.admin('GET', `/admin/v1/customer-users/${ofBot.user.id}`)
  t.equal(agent.statusCode, 200)
})

t.test('revoke-tokens: unknown or malformed ids are 404, no admin token is 401, and nothing changes', async (t) => {
  const acme = await tenant()
  const before = await snapshotRows(node)
  for (const url of [
    `/admin/v1/companies/${randomUUID()}/revoke-tokens`,
    '/admin/v1/companies/not-a-uuid/revoke-tokens',
    `/admin/v1/agents/${randomUUID()}/revoke-tokens`,
    '/admin/v1/agents/42/revoke-tokens',
  ]) {
    const response = await node.admin('POST', url)
    t.equal(response.statusCode, 404, url)
    t.strictSame(response.json(), notFound(url.includes('/companies/') ? 'Company' : 'Agent'), url)
  }
  for (const url of [`/admin/v1/companies/${acme.companyId}/revoke-tokens`, `/admin/v1/agents/${acme.agentId}/revoke-tokens`]) {
    const response = await node.inject({ method: 'POST', url, headers: { authorization: 'Bearer wrong' }, remoteAddress: `10.9.0.${url.length % 200}` })
    t.equal(response.statusCode, 401, url)
    t.strictSame(response.json(), INVALID_ADMIN_TOKEN)
  }
  t.equal(await snapshotRows(node), before)
})

t.test('no 5xx, and no secret or whole token in the logs', async (t) => {
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs), [])
})

t.test('a revocation is kept until exp + JWT_CLOCK_TOLERANCE + MAX_CLOCK_SKEW by the database\'s clock, whatever the revoking node\'s clock says', async (t) => {
  // MAX_CLOCK_SKEW 1m: a token that expired 30 s ago may still be accepted by a node 30 s behind.
  const skewed = await startApp(t, { JWT_CLOCK_TOLERANCE: '5', MAX_CLOCK_SKEW: '1m' })
  const acme = await createTenant(skewed, 'Acme')
  const { payload } = decodeToken((await issueToken(skewed, acme, 'heidi')).token)
  const forge = (exp: number, jti = randomUUID()) => ({ jti, token: forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...payload, jti, iat: exp - 60, exp }) })
  const revoke = (token: string) => post(skewed, '/rest/v1/auth/revoke-token', { keyId: acme.keyId, keySecret: acme.keySecret, token })
  const rows = (jti: string) => skewed.gateway.db.query('SELECT jti FROM revoked_token WHERE jti = $1', [jti])
  const grace = 65

  const recent = forge(nowSeconds() - 30)
  t.equal((await revoke(recent.token)).statusCode, 200)
  t.equal((await rows(recent.jti)).length, 1, 'expired 30 s ago, within 5 s + 1 min: written')
  t.strictSame((await verify(skewed, recent.token)).json().code, 'TOKEN_EXPIRED', 'this node refuses it at check 2 all the same')
  t.equal(await skewed.gateway.store.pruneRevokedTokens(grace), 0, 'not pruned within the grace')
  const loaded = async () => (await skewed.gateway.store.revokedJtis('', 10_000)).includes(recent.jti)
  t.equal(await loaded(), true, 'a node loads every revocation the store keeps, whatever its own clock says')

  const old = forge(nowSeconds() - 120)
  const before = await snapshotRows(skewed)
  const answer = await revoke(old.token)
  t.equal(answer.statusCode, 200, 'expired past the grace: 200 again')
  t.equal(await snapshotRows(skewed), before, 'and nothing to keep')
})
