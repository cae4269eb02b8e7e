/**
 * SPEC §7.3 "One company never slows another", new users, black box: a token for a `userId`
 * the company never used creates a customer user (a row in the shared store, an entry in
 * every node's shared cache), so each company may create them only at NEW_USERS_PER_MINUTE
 * after a burst of NEW_USERS_BURST (past it 429 `NEW_USER_RATE_LIMITED` with Retry-After)
 * and hold at most MAX_USERS_PER_COMPANY (past it 409 `USER_LIMIT`). A refusal writes
 * nothing; tokens for existing users are never refused by either; other companies are
 * unaffected; concurrent requests on two nodes of one store never overshoot.
 */
import t from 'tap'
import {
  countUsers,
  createTenant,
  errorBody,
  issueToken,
  leakedLogLines,
  post,
  serverErrorCounts,
  snapshotRows,
  startApp,
  type Tenant,
  type TestApp,
} from '../../../support/helpers.js'
import { sleep } from '../../../support/poll.js'

const RATE_LIMITED = errorBody(429, 'Too many new users for this company; retry later (tokens for existing users are not limited)', 'NEW_USER_RATE_LIMITED')
const userLimit = (max: number) => errorBody(409, `The company has reached its limit of ${max} users`, 'USER_LIMIT')

// One new user a minute once the burst is spent: within this file the bucket stays empty.
const RATE = { NEW_USERS_BURST: '10', NEW_USERS_PER_MINUTE: '1' }
const TOTAL = { MAX_USERS_PER_COMPANY: '10' }
const BOTH = { NEW_USERS_BURST: '3', NEW_USERS_PER_MINUTE: '1', MAX_USERS_PER_COMPANY: '3' }

// Each limit on two nodes of one store: the second has none of the first's caches.
const rate = await startApp(t, RATE)
const rateOther = await startApp(t, RATE, { db: rate.gateway.db })
const total = await startApp(t, TOTAL)
const totalOther = await startApp(t, TOTAL, { db: total.gateway.db })
const both = await startApp(t, BOTH)
const bothOther = await startApp(t, BOTH, { db: both.gateway.db })

const requestToken = (node: TestApp, tenant: Tenant, userId: string, extra: Record<string, unknown> = {}) =>
  post(node, '/rest/v1/auth/token', { keyId: tenant.keyId, keySecret: tenant.keySecret, userId, ...extra })

/** What a refused request must not have written: every row, and the events and change records. */
async function written(node: TestApp): Promise<string> {
  const counts = await node.gateway.db.query<{ events: unknown; changes: unknown }>('SELECT (SELECT count(*) FROM event) AS events, (SELECT count(*) FROM change_log) AS changes')
  return `${await snapshotRows(node)} events=${String(counts[0]!.events)} changes=${String(counts[0]!.changes)}`
}

async function newUsers(node: TestApp, tenant: Tenant, prefix: string, count: number) {
  for (let i = 0; i < count; i++) await issueToken(node, tenant, `${prefix}-${i}`)
}

/** The value of one series of /metrics (0 when absent). */
async function metric(node: TestApp, series: string): Promise<number> {
  const line = (await node.inject({ method: 'GET', url: '/metrics' })).body.split('\n').find((one) => one.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

t.test('past the burst a new user is 429 NEW_USER_RATE_LIMITED with Retry-After, and nothing is written', async (t) => {
  const acme = await createTenant(rate, 'Acme')
  await newUsers(rate, acme, 'burst', 10)
  const refusedBefore = await metric(rate, 'chat_auth_new_users_total{outcome="rate_limited"}')

  const before = await written(rate)
  const refused = await requestToken(rate, acme, 'one-too-many')
  t.equal(refused.statusCode, 429)
  t.strictSame(refused.json(), RATE_LIMITED)
  // One new user a minute and the bucket just emptied: about 60 s (a 10 s margin for a busy machine).
  const retryAfter = Number(refused.headers['retry-after'])
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 50 && retryAfter <= 60, `Retry-After ${String(refused.headers['retry-after'])}: the wait for one more new user`)
  t.strictSame((await requestToken(rateOther, acme, 'one-too-many')).json(), RATE_LIMITED, 'on the other node too')
  t.equal(await written(rate), before, 'no row, no event, no change record, no bucket spent')
  t.equal(await countUsers(rate, acme.companyId), 10)

  t.equal(await metric(rate, 'chat_auth_new_users_total{outcome="rate_limited"}'), refusedBefore + 1, 'each refusal counted on /metrics (no company label)')
  const warned = rate.logs.filter((line) => line.includes('"level":40') && line.includes(acme.companyId) && line.includes('NEW_USER_RATE_LIMITED'))
  t.equal(warned.length, 1, 'a warning names the company')
})

t.test('the burst refills at NEW_USERS_PER_MINUTE: after Retry-After a new user is accepted', async (t) => {
  // One new user every 3 s: the margin a busy machine has between two requests.
  const refill = await startApp(t, { NEW_USERS_BURST: '1', NEW_USERS_PER_MINUTE: '20' })
  const acme = await createTenant(refill, 'Acme')
  await issueToken(refill, acme, 'first')
  const refused = await requestToken(refill, acme, 'second')
  t.strictSame(refused.json(), RATE_LIMITED)
  const retryAfter = Number(refused.headers['retry-after'])
  t.ok(retryAfter >= 1 && retryAfter <= 3, `Retry-After ${retryAfter}`)
  await sleep(retryAfter * 1000 + 200)
  t.equal((await requestToken(refill, acme, 'second')).statusCode, 200, 'accepted once Retry-After has passed')
  t.strictSame((await requestToken(refill, acme, 'third')).json(), RATE_LIMITED, 'and the bucket is empty again')
})

t.test('past the total a new user is 409 USER_LIMIT, and nothing is written', async (t) => {
  const acme = await createTenant(total, 'Acme')
  await newUsers(total, acme, 'member', 10)
  const before = await written(total)
  const refused = await requestToken(total, acme, 'eleventh')
  t.equal(refused.statusCode, 409)
  t.strictSame(refused.json(), userLimit(10))
  t.equal(refused.headers['retry-after'], undefined, 'waiting does not help: no Retry-After')
  t.strictSame((await requestToken(totalOther, acme, 'eleventh')).json(), userLimit(10), 'on the other node too')
  t.equal(await written(total), before, 'no row, no event, no change record')
  t.equal(await metric(total, 'chat_auth_new_users_total{outcome="user_limit"}'), 1)
})

t.test('existing users keep getting tokens while the company is at both limits, on every node', async (t) => {
  const acme = await createTenant(both, 'Acme')
  await newUsers(both, acme, 'member', 3)
  t.strictSame((await requestToken(both, acme, 'newcomer')).json(), userLimit(3), 'at the total (and the burst spent)')
  const usage = (await both.admin('GET', `/admin/v1/companies/${acme.companyId}/usage`)).json()
  t.equal(usage.newUsersAvailable, 0, 'and no new user left in the bucket')

  // This node has them cached; the other reads them from the store.
  const existing = ['member-0', 'member-1', 'member-2']
  const answers = await Promise.all([both, bothOther].flatMap((node) => existing.flatMap((userId) => [requestToken(node, acme, userId), requestToken(node, acme, userId)])))
  t.strictSame(answers.map((answer) => answer.statusCode), answers.map(() => 200), 'every token for an existing user: 200')
  const second = (await both.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'second' })).json()
  const retied = await requestToken(bothOther, acme, 'member-0', { agentId: second.id })
  t.equal(retied.statusCode, 200, 'an existing user tied to another agent: 200')
  t.equal(retied.json().agent.id, second.id)
  t.strictSame((await requestToken(bothOther, acme, 'newcomer')).json(), userLimit(3), 'a new user still refused')
  t.equal(await countUsers(both, acme.companyId), 3)
})

t.test('a company at its limits leaves other companies unaffected', async (t) => {
  const acme = await createTenant(rate, 'Acme')
  const other = await createTenant(rate, 'Other')
  await newUsers(rate, acme, 'member', 10)
  t.strictSame((await requestToken(rate, acme, 'more')).json(), RATE_LIMITED)
  await newUsers(rate, other, 'member', 10)
  t.equal(await countUsers(rate, other.companyId), 10, "the other company's whole burst")

  const full = await createTenant(total, 'Full')
  const neighbour = await createTenant(total, 'Neighbour')
  await newUsers(total, full, 'member', 10)
  t.strictSame((await requestToken(total, full, 'more')).json(), userLimit(10))
  await newUsers(totalOther, neighbour, 'member', 10)
  t.equal(await countUsers(total, neighbour.companyId), 10, "the other company's whole total")
})

t.test('50 concurrent new users on two nodes of one store: exactly the total, exactly the burst', async (t) => {
  const acme = await createTenant(total, 'Acme')
  const atTotal = await Promise.all(Array.from({ length: 50 }, (_, i) => requestToken(i % 2 === 0 ? total : totalOther, acme, `rush-${i}`)))
  const statuses = atTotal.map((answer) => answer.statusCode)
  t.equal(statuses.filter((status) => status === 200).length, 10, 'exactly the total created')
  t.equal(statuses.filter((status) => status === 409).length, 40, 'every other one refused')
  for (const answer of atTotal.filter((one) => one.statusCode !== 200)) t.strictSame(answer.json(), userLimit(10))
  t.equal(await countUsers(total, acme.companyId), 10, 'rows: exactly the total')

  const burst = await createTenant(rate, 'Burst')
  const atBurst = await Promise.all(Array.from({ length: 50 }, (_, i) => requestToken(i % 2 === 0 ? rate : rateOther, burst, `rush-${i}`)))
  t.equal(atBurst.filter((answer) => answer.statusCode === 200).length, 10, 'exactly the burst created')
  for (const answer of atBurst.filter((one) => one.statusCode !== 200)) t.strictSame(answer.json(), RATE_LIMITED)
  t.equal(await countUsers(rate, burst.companyId), 10, 'rows: exactly the burst')

  // The same new userId many times at once, for the last place: one user, every answer 200.
  const last = await createTenant(both, 'Last')
  await newUsers(both, last, 'member', 2)
  const same = await Promise.all(Array.from({ length: 12 }, (_, i) => requestToken(i % 2 === 0 ? both : bothOther, last, 'the-last-one')))
  t.strictSame(same.map((answer) => answer.statusCode), same.map(() => 200), 'every request for the one new user: 200')
  t.equal(new Set(same.map((answer) => answer.json().user.id)).size, 1, 'one user')
  t.equal(await countUsers(both, last.companyId), 3)
})

t.test("GET /admin/v1/companies/:companyId/usage: a company's users and new users against its limits", async (t) => {
  const acme = await createTenant(both, 'Acme')
  const fresh = await both.admin('GET', `/admin/v1/companies/${acme.companyId}/usage`)
  t.equal(fresh.statusCode, 200)
  t.strictSame(fresh.json(), {
    companyId: acme.companyId,
    users: 0,
    maxUsers: 3,
    newUsersAvailable: 3,
    newUsersBurst: 3,
    newUsersPerMinute: 1,
    liveTokenRevocations: 0,
    maxLiveTokenRevocations: 100_000,
  })
  await newUsers(both, acme, 'member', 2)
  t.strictSame((await bothOther.admin('GET', `/admin/v1/companies/${acme.companyId}/usage`)).json(), { ...fresh.json(), users: 2, newUsersAvailable: 1 }, 'from any node')
  t.equal((await both.admin('GET', '/admin/v1/companies/00000000-0000-4000-8000-000000000000/usage')).statusCode, 404)
  t.strictSame((await both.admin('GET', '/admin/v1/companies/not-a-uuid/usage')).json(), errorBody(404, 'Company not found', 'NOT_FOUND'))
  t.equal((await both.inject({ method: 'GET', url: `/admin/v1/companies/${acme.companyId}/usage` })).statusCode, 401, 'admin only')
})

t.test('no 5xx, and no secret or whole token in the logs', async (t) => {
  for (const node of [rate, rateOther, total, totalOther, both, bothOther]) {
    t.strictSame(await serverErrorCounts(node), [])
    t.strictSame(leakedLogLines(node.logs), [])
  }
})
