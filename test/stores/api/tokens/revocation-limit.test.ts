/**
 * MAX_LIVE_TOKEN_REVOCATIONS, black box: a company holds at most that many live single-token
 * revocations (`POST /rest/v1/auth/revoke-token`). Past it a first revocation is refused with
 * 409 `REVOCATION_LIMIT` and writes nothing; a repeated one still answers 200; a pruned
 * revocation frees its place; concurrent revocations never overshoot; other companies are
 * unaffected.
 */
import t from 'tap'
import { createTenant, decodeToken, errorBody, forgeHs256, hs256Kid, issueToken, leakedLogLines, nowSeconds, post, randomUUID, serverErrorCounts, snapshotRows, startApp, verify, type Tenant } from '../../../support/helpers.js'
import { sleep } from '../../../support/poll.js'
import { TOKEN_REVOKED } from '../../../support/spec-bodies.js'

const LIMIT = 3
const LIMIT_REACHED = errorBody(
  409,
  `The company has reached its limit of ${LIMIT} live single-token revocations: invalidate the user (POST /rest/v1/auth/invalidate-token) or revoke the company's tokens instead`,
  'REVOCATION_LIMIT',
)

const node = await startApp(t, { MAX_LIVE_TOKEN_REVOCATIONS: String(LIMIT) })
const revokeToken = (key: Pick<Tenant, 'keyId' | 'keySecret'>, token: string) => post(node, '/rest/v1/auth/revoke-token', { keyId: key.keyId, keySecret: key.keySecret, token })

/** `count` tokens of one user of the tenant, each its own jti, signed as the node signs (faster than issuing each). */
async function tokensOf(tenant: Tenant, count: number, lifetimeSeconds = 3600): Promise<string[]> {
  const { payload } = decodeToken((await issueToken(node, tenant, 'device-owner')).token)
  const header = { alg: 'HS256', typ: 'JWT', kid: hs256Kid() }
  return Array.from({ length: count }, () => forgeHs256(header, { ...payload, jti: randomUUID(), iat: nowSeconds(), exp: nowSeconds() + lifetimeSeconds }))
}

/** What a refused request must not have written: the rows, and the events and change records. */
async function written(): Promise<string> {
  const counts = await node.gateway.db.query<{ events: unknown; changes: unknown }>('SELECT (SELECT count(*) FROM event) AS events, (SELECT count(*) FROM change_log) AS changes')
  return `${await snapshotRows(node)} events=${String(counts[0]!.events)} changes=${String(counts[0]!.changes)}`
}

const revokedRows = async (companyId: string) =>
  Number((await node.gateway.db.query<{ n: unknown }>('SELECT count(*) AS n FROM revoked_token WHERE company_id = $1', [companyId]))[0]!.n)

t.test('past the limit a first revocation is 409 REVOCATION_LIMIT, and nothing is written', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const tokens = await tokensOf(acme, LIMIT + 1)
  for (const token of tokens.slice(0, LIMIT)) t.equal((await revokeToken(acme, token)).statusCode, 200, 'within the limit')

  const before = await written()
  const refused = await revokeToken(acme, tokens[LIMIT]!)
  t.equal(refused.statusCode, 409)
  t.strictSame(refused.json(), LIMIT_REACHED)
  t.equal(await written(), before, 'no row, no event, no change record')
  t.equal((await verify(node, tokens[LIMIT]!)).statusCode, 200, 'the refused token is not revoked')
  t.equal(await revokedRows(acme.companyId), LIMIT)
})

t.test('at the limit, revoking an already revoked token still answers 200 (idempotent)', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const tokens = await tokensOf(acme, LIMIT)
  const answers = []
  for (const token of tokens) answers.push(await revokeToken(acme, token))
  for (const [index, token] of tokens.entries()) {
    const again = await revokeToken(acme, token)
    t.equal(again.statusCode, 200, `token ${index} again`)
    t.strictSame(again.json(), answers[index]!.json())
    t.strictSame((await verify(node, token)).json(), TOKEN_REVOKED)
  }
  t.equal(await revokedRows(acme.companyId), LIMIT)
})

t.test('once expired revocations are pruned, the company can revoke again', async (t) => {
  const acme = await createTenant(node, 'Acme')
  for (const token of await tokensOf(acme, LIMIT, 2)) t.equal((await revokeToken(acme, token)).statusCode, 200)
  const [next] = await tokensOf(acme, 1)
  t.strictSame((await revokeToken(acme, next!)).json(), LIMIT_REACHED, 'control: at the limit')
  await sleep(3000)
  t.equal(await node.gateway.store.pruneRevokedTokens(0), LIMIT, 'the expired revocations are pruned')
  const answer = await revokeToken(acme, next!)
  t.equal(answer.statusCode, 200, 'a pruned revocation frees its place')
  t.strictSame((await verify(node, next!)).json(), TOKEN_REVOKED)
  const more = await tokensOf(acme, LIMIT)
  for (const token of more.slice(0, LIMIT - 1)) t.equal((await revokeToken(acme, token)).statusCode, 200)
  t.strictSame((await revokeToken(acme, more[LIMIT - 1]!)).json(), LIMIT_REACHED, 'and the limit holds again')
})

t.test('concurrent revocations never overshoot the limit', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const tokens = await tokensOf(acme, 24)
  const answers = await Promise.all(tokens.map((token) => revokeToken(acme, token)))
  const statuses = answers.map((answer) => answer.statusCode)
  t.equal(statuses.filter((status) => status === 200).length, LIMIT, 'exactly the limit accepted')
  t.equal(statuses.filter((status) => status === 409).length, tokens.length - LIMIT, 'every other one refused')
  for (const answer of answers.filter((one) => one.statusCode === 409)) t.strictSame(answer.json(), LIMIT_REACHED)
  t.equal(await revokedRows(acme.companyId), LIMIT, 'rows: exactly the limit')
  const accepted = tokens.filter((_token, index) => statuses[index] === 200)
  for (const token of accepted) t.strictSame((await verify(node, token)).json(), TOKEN_REVOKED)

  // The same token revoked many times at once, for the last place: one row, every answer 200.
  const other = await createTenant(node, 'Other')
  const fill = await tokensOf(other, LIMIT)
  for (const token of fill.slice(0, LIMIT - 1)) t.equal((await revokeToken(other, token)).statusCode, 200)
  const last = fill[LIMIT - 1]!
  const same = await Promise.all(Array.from({ length: 12 }, () => revokeToken(other, last)))
  t.strictSame(
    same.map((answer) => answer.statusCode),
    same.map(() => 200),
    'every revocation of the one token answers 200',
  )
  t.equal(await revokedRows(other.companyId), LIMIT)
  t.strictSame((await revokeToken(other, (await tokensOf(other, 1))[0]!)).json(), LIMIT_REACHED, 'the last place is taken once')
})

t.test('a company at its limit leaves other companies unaffected', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const other = await createTenant(node, 'Other')
  const ofAcme = await tokensOf(acme, LIMIT + 1)
  for (const token of ofAcme.slice(0, LIMIT)) await revokeToken(acme, token)
  t.strictSame((await revokeToken(acme, ofAcme[LIMIT]!)).json(), LIMIT_REACHED)
  for (const token of await tokensOf(other, LIMIT)) {
    const answer = await revokeToken(other, token)
    t.equal(answer.statusCode, 200)
    t.strictSame((await verify(node, token)).json(), TOKEN_REVOKED)
  }
  t.equal(await revokedRows(other.companyId), LIMIT)
  // invalidate-token stays open to the company at its limit: it stores no row per token.
  const user = (await issueToken(node, acme, 'device-owner')).user
  t.equal((await post(node, '/rest/v1/auth/invalidate-token', { keyId: acme.keyId, keySecret: acme.keySecret, customerUserId: user.id })).statusCode, 200)
  t.strictSame((await verify(node, ofAcme[LIMIT]!)).json(), TOKEN_REVOKED, 'the user\'s tokens, the refused one with them, are revoked')
})

t.test('no 5xx, and no secret or whole token in the logs', async (t) => {
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs), [])
})
