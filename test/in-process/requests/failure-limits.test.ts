/**
 * Issue 10, finding 2 (SPEC §7.3): failed credentials are limited per client address and
 * per keyId — past AUTH_FAILURE_LIMIT (20) in a minute every further attempt, right or
 * wrong, answers 429 with Retry-After; successful calls never count; verify never answers
 * 429; TRUST_PROXY decides whose address X-Forwarded-For is; each failure is logged with
 * its keyId and client address, never the secret; counted across nodes through Redis.
 */
import t, { type Test } from 'tap'
import type { LightMyRequestResponse } from 'fastify'
import { Redis } from 'ioredis'
import { ADMIN_TOKEN, createTenant, errorBody, freshPostgresDatabase, issueToken, leakedLogLines, randomUUID, sharedDb, startApp, STORE, type Tenant, type TestApp } from '../../support/helpers.js'
import { INVALID_ADMIN_TOKEN, INVALID_API_CREDENTIALS } from '../../support/spec-bodies.js'

const RATE_LIMITED = errorBody(429, 'Too many failed attempts', 'RATE_LIMITED')
const LIMIT = 20
let addresses = 0
/** A client address no other test has used. */
const freshAddress = () => `10.9.${Math.floor(++addresses / 250)}.${(addresses % 250) + 1}`

function tokenCall(node: TestApp, from: string, keyId: string, keySecret: string, headers: Record<string, string> = {}) {
  return node.inject({ method: 'POST', url: '/rest/v1/auth/token', remoteAddress: from, headers, payload: { keyId, keySecret, userId: 'limited-user' } })
}

function assertLimited(t: Test, response: LightMyRequestResponse, label: string) {
  t.equal(response.statusCode, 429, label)
  t.strictSame(response.json(), RATE_LIMITED, label)
  const retryAfter = Number(response.headers['retry-after'])
  t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `${label}: Retry-After ${response.headers['retry-after']} is 1..60 s`)
}

// One store for every node of this file: each embedded store costs seconds to start.
const db = await sharedDb(t)
const node = await startApp(t, {}, { db })
const newTenant = (): Promise<Tenant> => createTenant(node, `Tenant ${randomUUID()}`)

t.test('past 20 wrong secrets from one address, every attempt from it answers 429, the right secret too', async (t) => {
  const acme = await newTenant()
  const attacker = freshAddress()
  for (let i = 0; i < LIMIT; i++) {
    const response = await tokenCall(node, attacker, acme.keyId, `wrong-secret-${i}`)
    t.equal(response.statusCode, 401, `failure ${i + 1} is a plain 401`)
    t.strictSame(response.json(), INVALID_API_CREDENTIALS)
  }
  assertLimited(t, await tokenCall(node, attacker, acme.keyId, 'wrong-secret-21'), 'the 21st attempt')
  assertLimited(t, await tokenCall(node, attacker, acme.keyId, acme.keySecret), 'a right secret from that address: no oracle')
  const invalidate = await node.inject({ method: 'POST', url: '/rest/v1/auth/invalidate-token', remoteAddress: attacker, payload: { keyId: acme.keyId, keySecret: acme.keySecret, customerUserId: randomUUID() } })
  assertLimited(t, invalidate, 'invalidate-token from that address')
})

t.test('past 20 failures against one keyId, from any number of addresses, that key answers 429; other keys do not', async (t) => {
  const acme = await newTenant()
  const other = await newTenant()
  for (let i = 0; i < LIMIT; i++) t.equal((await tokenCall(node, freshAddress(), acme.keyId, 'wrong')).statusCode, 401)
  assertLimited(t, await tokenCall(node, freshAddress(), acme.keyId, acme.keySecret), 'the key, from a new address')
  t.equal((await tokenCall(node, freshAddress(), other.keyId, other.keySecret)).statusCode, 200, 'another key is not limited')
})

t.test('unknown keyIds count against the address', async (t) => {
  const acme = await newTenant()
  const sprayer = freshAddress()
  for (let i = 0; i < LIMIT; i++) t.equal((await tokenCall(node, sprayer, `ak_made_up_${i}`, 'wrong')).statusCode, 401)
  assertLimited(t, await tokenCall(node, sprayer, acme.keyId, acme.keySecret), 'a real key from the spraying address')
  t.equal((await tokenCall(node, freshAddress(), acme.keyId, acme.keySecret)).statusCode, 200, 'the real key from elsewhere')
})

t.test('successful calls are never counted', async (t) => {
  const acme = await newTenant()
  const busy = freshAddress()
  const statuses = new Set<number>()
  for (let i = 0; i < 3 * LIMIT; i++) statuses.add((await tokenCall(node, busy, acme.keyId, acme.keySecret)).statusCode)
  t.same([...statuses], [200], `${3 * LIMIT} good calls from one address and key: all 200`)
  // …and they leave the whole allowance of failures untouched.
  for (let i = 0; i < LIMIT; i++) t.equal((await tokenCall(node, busy, acme.keyId, 'wrong')).statusCode, 401)
  assertLimited(t, await tokenCall(node, busy, acme.keyId, 'wrong'), 'the 21st failure')
})

t.test('wrong admin tokens: 429 past the limit, on any admin path, even with the right token', async (t) => {
  const prober = freshAddress()
  const admin = (token: string, url = '/admin/v1/companies/' + randomUUID()) =>
    node.inject({ method: 'GET', url, remoteAddress: prober, headers: { authorization: `Bearer ${token}` } })
  for (let i = 0; i < LIMIT; i++) {
    const response = await admin(`guess-${i}-xxxxxxxxxxxxxxxx`, i % 2 ? '/admin/v1/no/such/path' : undefined)
    t.equal(response.statusCode, 401)
    t.strictSame(response.json(), INVALID_ADMIN_TOKEN)
  }
  assertLimited(t, await admin(ADMIN_TOKEN), 'the right admin token from that address')
  const elsewhere = await node.inject({ method: 'GET', url: '/admin/v1/companies/' + randomUUID(), remoteAddress: freshAddress(), headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.equal(elsewhere.statusCode, 404, 'the admin from another address is not limited')
})

t.test('verify never answers 429, even from a blocked address', async (t) => {
  const acme = await newTenant()
  const issued = await issueToken(node, acme, 'verify-user')
  const blocked = freshAddress()
  for (let i = 0; i <= LIMIT; i++) await tokenCall(node, blocked, acme.keyId, 'wrong')
  assertLimited(t, await tokenCall(node, blocked, acme.keyId, 'wrong'), 'the address is blocked')
  for (const authorization of [`Bearer ${issued.token}`, 'Bearer not-a-token', '']) {
    const response = await node.inject({ method: 'GET', url: '/rest/v1/auth/verify', remoteAddress: blocked, headers: authorization ? { authorization } : {} })
    t.ok([200, 401].includes(response.statusCode), `verify answered ${response.statusCode}`)
  }
})

t.test('each failure is logged at info with its keyId and client address, never the secret', async (t) => {
  const acme = await newTenant()
  const from = freshAddress()
  const secret = 'sk_wrong_but_still_a_secret_' + randomUUID()
  const before = node.logs.length
  await tokenCall(node, from, acme.keyId, secret)
  const lines = node.logs.slice(before).map((line) => JSON.parse(line) as Record<string, unknown>)
  const failure = lines.find((line) => line.code === 'INVALID_API_CREDENTIALS')
  t.ok(failure, 'the failure is logged')
  t.equal(failure?.level, 30, 'at info')
  t.equal(failure?.keyId, acme.keyId)
  t.equal(failure?.clientAddress, from)
  t.same(leakedLogLines(node.logs.slice(before), [secret]), [], 'the presented secret is not logged')
})

t.test('TRUST_PROXY: X-Forwarded-For names the client only behind a named proxy', async (t) => {
  const proxied = await startApp(t, { TRUST_PROXY: '127.0.0.1' }, { db })
  const acme = await createTenant(proxied, 'Proxied')
  const direct = await startApp(t, {}, { db })
  const acmeDirect = await createTenant(direct, 'Direct')
  // Through the trusted proxy, each forwarded client has its own count.
  for (let i = 0; i < LIMIT; i++) await tokenCall(proxied, '127.0.0.1', `ak_unknown_${i}`, 'wrong', { 'x-forwarded-for': '203.0.113.7' })
  assertLimited(t, await tokenCall(proxied, '127.0.0.1', acme.keyId, acme.keySecret, { 'x-forwarded-for': '203.0.113.7' }), 'the forwarded client')
  t.equal((await tokenCall(proxied, '127.0.0.1', acme.keyId, acme.keySecret, { 'x-forwarded-for': '203.0.113.8' })).statusCode, 200, 'another client behind the same proxy')
  // Without TRUST_PROXY the header is the caller's word, not evidence: the socket decides.
  const spoofer = freshAddress()
  for (let i = 0; i < LIMIT; i++) await tokenCall(direct, spoofer, `ak_unknown_${i}`, 'wrong', { 'x-forwarded-for': `198.51.100.${i}` })
  assertLimited(t, await tokenCall(direct, spoofer, acmeDirect.keyId, acmeDirect.keySecret, { 'x-forwarded-for': '198.51.100.200' }), 'a spoofed header changes nothing')
})

t.test('AUTH_FAILURE_LIMIT=0 turns the limit off', async (t) => {
  const open = await startApp(t, { AUTH_FAILURE_LIMIT: '0' }, { db })
  const acme = await createTenant(open, 'Unlimited')
  const from = freshAddress()
  const statuses = new Set<number>()
  for (let i = 0; i < LIMIT + 5; i++) statuses.add((await tokenCall(open, from, acme.keyId, 'wrong')).statusCode)
  t.same([...statuses], [401])
})

t.test('counted across nodes through Redis', { skip: STORE !== 'postgres' && 'the many-node shape needs PostgreSQL: runs with TEST_STORE=postgres' }, async (t) => {
  const env = { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL: 'redis://127.0.0.1:6379', REDIS_PREFIX: `limits-test-${randomUUID()}` }
  const a = await startApp(t, env)
  const b = await startApp(t, env)
  const acme = await createTenant(a, 'Shared')
  const attacker = freshAddress()
  for (let i = 0; i < LIMIT; i++) t.equal((await tokenCall(i % 2 ? a : b, attacker, acme.keyId, 'wrong')).statusCode, 401)
  assertLimited(t, await tokenCall(a, attacker, acme.keyId, acme.keySecret), 'node a, after failures on both')
  assertLimited(t, await tokenCall(b, freshAddress(), acme.keyId, acme.keySecret), 'node b, the key from a new address')
})

t.test("the counts' Redis keys: the deployment's prefix, then the address or the keyId", { skip: STORE !== 'postgres' && 'the many-node shape needs PostgreSQL: runs with TEST_STORE=postgres' }, async (t) => {
  // Issue 40, point 9: they read `<prefix>:auth-failures:undefinedundefined-<address>`, the
  // route's method and URL of @fastify/rate-limit's per-route stores, which these limiters lack.
  const prefix = `limits-keys-${randomUUID()}`
  const a = await startApp(t, { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL: 'redis://127.0.0.1:6379', REDIS_PREFIX: prefix })
  const acme = await createTenant(a, 'Keys')
  const attacker = freshAddress()
  t.equal((await tokenCall(a, attacker, acme.keyId, 'wrong')).statusCode, 401)
  const redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: true })
  await redis.connect()
  t.teardown(() => redis.quit())
  const keys: string[] = []
  for await (const batch of redis.scanStream({ match: `${prefix}:auth-failures:*`, count: 1000 })) keys.push(...(batch as string[]))
  t.strictSame(keys.sort(), [`${prefix}:auth-failures:${attacker}`, `${prefix}:auth-failures:keyId:${acme.keyId}`].sort())
  for (const key of keys) {
    t.equal(await redis.get(key), '1', `${key} counts the one failure`)
    const ttl = await redis.pttl(key)
    t.ok(ttl > 0 && ttl <= 60_000, `${key} lives one window at most (${ttl} ms left)`)
  }
})
