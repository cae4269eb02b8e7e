import { performance } from 'node:perf_hooks'
import t from 'tap'
import * as oauth from 'oauth4webapi'
import { freshPostgresDatabase } from '../../support/databases.js'
import { admin, call, setupCompany, verify } from '../../support/http-client.js'
import { waitFor } from '../../support/poll.js'
import { startGatewayProcess, type GatewayProcess } from '../../support/processes.js'
import { startRedis, type RedisServer } from '../../support/services.js'

/**
 * Three real node processes (`node dist/src/cli.js serve`) over the real PostgreSQL
 * (a fresh database, dropped after) and a real Redis of their own (a redis-server on a free
 * port, so that no other run shares its channel or registry). A change made through one
 * node is refused by the other two from the moment it answers.
 *
 * It runs the same in both passes of `npm test`: it never uses the pass's store.
 */
let databaseUrl: string
let redis: RedisServer
let nodes: GatewayProcess[] = []
const startNode = (name: string, env: Record<string, string>) => startGatewayProcess(env, { name })

t.before(async () => {
  databaseUrl = await freshPostgresDatabase(t)
  redis = await startRedis()
})

t.teardown(async () => {
  await Promise.allSettled(nodes.map((n) => n.stop()))
  await redis?.stop()
})

// (startGatewayProcess sets KEEP_ALIVE_TIMEOUT=3: connections are reused within the bursts
// below, and a node stopped after them waits out at most one second of its drain.)
const env = () => ({ DATABASE_URL: databaseUrl, REDIS_URL: redis.url, CACHE_LEASE_MS: '500' })

const token = async (base: string, key: { keyId: string; keySecret: string }, userId: string, agentId?: string) => {
  const answer = await call(base, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId, ...(agentId ? { agentId } : {}) })
  if (answer.status !== 200) throw new Error(`token: ${answer.status} ${JSON.stringify(answer.body)}`)
  return answer.body as { token: string; user: { id: string } }
}

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!
}

t.test('three nodes: a change made on one is refused on the others the moment it answers', async (t) => {
  // One node first, so that migrations run once; the others join it.
  nodes.push(await startNode('node-0', env()))
  nodes.push(...(await Promise.all([startNode('node-1', env()), startNode('node-2', env())])))
  const [a, b, c] = nodes.map((n) => n.url) as [string, string, string]

  // Each node answered /readyz 200 before it was handed over; on a loaded machine one can
  // then say 503 for a moment (say its 500 ms lease lapsed before the renewal ran, or its
  // database ping took over 2 s: it stops vouching, as it must). It has to vouch again, soon.
  const ready = await waitFor('node-1 to vouch for its cache', () => call(b, 'GET', '/readyz'), { until: (answer) => answer.status === 200, timeoutMs: 10_000 })
  t.equal(ready.status, 200, '/readyz: the channel vouches for the cache')

  const key = await setupCompany(a)

  await t.test('invalidate on one node, verify on the two others at once', async (t) => {
    let { token: current, user } = await token(a, key, 'alice')
    const latencies: number[] = []
    for (let round = 0; round < 60; round++) {
      // warm every node's cache with the current version
      const warm = await Promise.all([a, b, c].map((base) => verify(base, current)))
      if (!warm.every((w) => w.status === 200)) {
        t.fail(`round ${round}: the current token is not accepted everywhere: ${warm.map((w) => w.status)}`)
        return
      }
      const writer = [a, b, c][round % 3]!
      const started = performance.now()
      const invalidated = await call(writer, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: user.id })
      latencies.push(performance.now() - started)
      if (invalidated.status !== 200) {
        t.fail(`round ${round}: invalidate answered ${invalidated.status}`)
        return
      }
      const others = [a, b, c].filter((base) => base !== writer)
      const after = await Promise.all(others.map((base) => verify(base, current)))
      if (!after.every((v) => v.status === 401 && v.body.code === 'TOKEN_REVOKED')) {
        t.fail(`round ${round}: a revoked token was accepted: ${JSON.stringify(after.map((v) => [v.status, v.body.code]))}`)
        return
      }
      ;({ token: current, user } = await token([a, b, c][(round + 1) % 3]!, key, 'alice'))
    }
    t.pass('60 invalidations, each refused at once by both other nodes')
    // the first rounds also open database connections and warm the JIT: shown apart
    const warm = latencies.slice(10)
    t.comment(
      `invalidate-token over HTTP, 3 nodes, calls 11-60: p50 ${quantile(warm, 0.5).toFixed(1)} ms, p99 ${quantile(warm, 0.99).toFixed(1)} ms; ` +
        `first 10: ${latencies
          .slice(0, 10)
          .map((l) => l.toFixed(1))
          .join(' ')} ms`,
    )
    for (const [i, base] of [a, b, c].entries()) {
      const text = String((await call(base, 'GET', '/metrics')).body)
      // The histogram's buckets: the bound each quantile falls under.
      const buckets = [...text.matchAll(/chat_auth_bus_ack_latency_seconds_bucket\{le="([^"]+)"\} (\d+)/g)].map((m) => ({ le: Number(m[1]), count: Number(m[2]) }))
      const total = buckets.at(-1)?.count ?? 0
      const q = (quantile: number) => (buckets.find((b) => b.count >= quantile * total)?.le ?? NaN) * 1000
      t.comment(`node-${i} bus publish→all acked over ${total} publishes: p50 ≤ ${q(0.5)} ms, p99 ≤ ${q(0.99)} ms`)
    }
  })

  await t.test('deactivating a user on one node', async (t) => {
    const { token: bobToken, user } = await token(b, key, 'bob')
    for (const base of [a, b, c]) t.equal((await verify(base, bobToken)).status, 200)
    const patched = await admin(b, 'PATCH', `/admin/v1/customer-users/${user.id}`, { active: false })
    t.equal(patched.status, 200)
    const after = await Promise.all([a, c].map((base) => verify(base, bobToken)))
    t.same(
      after.map((v) => [v.status, v.body.code]),
      [
        [401, 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE'],
        [401, 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE'],
      ],
    )
  })

  await t.test('deactivating an agent on one node', async (t) => {
    const second = await admin(a, 'POST', `/admin/v1/companies/${key.companyId}/agents`, { name: 'Second' })
    t.equal(second.status, 201)
    const { token: carolToken } = await token(c, key, 'carol', second.body.id)
    for (const base of [a, b, c]) t.equal((await verify(base, carolToken)).status, 200)
    const patched = await admin(c, 'PATCH', `/admin/v1/agents/${second.body.id}`, { active: false })
    t.equal(patched.status, 200)
    const after = await Promise.all([a, b].map((base) => verify(base, carolToken)))
    t.same(
      after.map((v) => [v.status, v.body.code]),
      [
        [401, 'AGENT_INACTIVE'],
        [401, 'AGENT_INACTIVE'],
      ],
    )
  })

  await t.test('revoking an API key on one node', async (t) => {
    const extra = await admin(a, 'POST', `/admin/v1/companies/${key.companyId}/api-keys`, { name: 'to revoke' })
    t.equal(extra.status, 201)
    const creds = { keyId: extra.body.keyId, keySecret: extra.body.keySecret }
    for (const base of [a, b, c]) t.equal((await call(base, 'POST', '/rest/v1/auth/token', { ...creds, userId: 'dave' })).status, 200)
    t.equal((await admin(a, 'DELETE', `/admin/v1/api-keys/${creds.keyId}`)).status, 200)
    const after = await Promise.all([b, c].map((base) => call(base, 'POST', '/rest/v1/auth/token', { ...creds, userId: 'dave' })))
    t.same(
      after.map((v) => [v.status, v.body.code]),
      [
        [401, 'INVALID_API_CREDENTIALS'],
        [401, 'INVALID_API_CREDENTIALS'],
      ],
    )
  })

  await t.test('revoking one token on one node (revoke-token)', async (t) => {
    const { token: phone } = await token(a, key, 'frank')
    const { token: laptop } = await token(a, key, 'frank')
    // every node caches the user, agent and company, and knows the revoked set is complete
    for (const base of [a, b, c]) t.equal((await verify(base, phone)).status, 200)
    const revoked = await call(b, 'POST', '/rest/v1/auth/revoke-token', { keyId: key.keyId, keySecret: key.keySecret, token: phone })
    t.equal(revoked.status, 200)
    const after = await Promise.all([a, c].map((base) => verify(base, phone)))
    t.same(
      after.map((v) => [v.status, v.body.code]),
      [
        [401, 'TOKEN_REVOKED'],
        [401, 'TOKEN_REVOKED'],
      ],
    )
    for (const base of [a, b, c]) t.equal((await verify(base, laptop)).status, 200, 'the other token of the user stays valid')
  })

  await t.test('revoking one token through OAuth (POST /oauth2/revoke, RFC 7009) on one node', async (t) => {
    const { token: phone } = await token(a, key, 'oauth-frank')
    const { token: laptop } = await token(a, key, 'oauth-frank')
    for (const base of [a, b, c]) t.equal((await verify(base, phone)).status, 200)
    // A third-party OAuth client, as a proxy or resource server would call it.
    const server: oauth.AuthorizationServer = { issuer: c, revocation_endpoint: `${c}/oauth2/revoke`, introspection_endpoint: `${a}/oauth2/introspect` }
    const client: oauth.Client = { client_id: key.keyId }
    const response = await oauth.revocationRequest(server, client, oauth.ClientSecretBasic(key.keySecret), phone, { [oauth.allowInsecureRequests]: true })
    t.equal(response.status, 200)
    await oauth.processRevocationResponse(response)
    // The 200 means every node already refuses it: verified on the others at once, no retry.
    const after = await Promise.all([a, b].map((base) => verify(base, phone)))
    t.same(
      after.map((v) => [v.status, v.body.code]),
      [
        [401, 'TOKEN_REVOKED'],
        [401, 'TOKEN_REVOKED'],
      ],
    )
    const introspected = await oauth.introspectionRequest(server, client, oauth.ClientSecretPost(key.keySecret), phone, { [oauth.allowInsecureRequests]: true })
    t.equal((await oauth.processIntrospectionResponse(server, client, introspected)).active, false, 'inactive to introspection on another node')
    for (const base of [a, b, c]) t.equal((await verify(base, laptop)).status, 200, 'the other token of the user stays valid')
  })

  await t.test('revoking every token of an agent, then of a company, on one node', async (t) => {
    const bot = await admin(a, 'POST', `/admin/v1/companies/${key.companyId}/agents`, { name: 'Bot' })
    t.equal(bot.status, 201)
    const { token: ofBot } = await token(b, key, 'gina', bot.body.id)
    const { token: ofDefault } = await token(b, key, 'hank')
    for (const base of [a, b, c]) for (const tk of [ofBot, ofDefault]) t.equal((await verify(base, tk)).status, 200)

    t.equal((await admin(c, 'POST', `/admin/v1/agents/${bot.body.id}/revoke-tokens`)).status, 200)
    const afterAgent = await Promise.all([a, b].map((base) => verify(base, ofBot)))
    t.same(afterAgent.map((v) => [v.status, v.body.code]), [
      [401, 'TOKEN_REVOKED'],
      [401, 'TOKEN_REVOKED'],
    ])
    for (const base of [a, b]) t.equal((await verify(base, ofDefault)).status, 200, 'another agent\'s token stays valid')

    t.equal((await admin(a, 'POST', `/admin/v1/companies/${key.companyId}/revoke-tokens`)).status, 200)
    const afterCompany = await Promise.all([b, c].map((base) => verify(base, ofDefault)))
    t.same(afterCompany.map((v) => [v.status, v.body.code]), [
      [401, 'TOKEN_REVOKED'],
      [401, 'TOKEN_REVOKED'],
    ])
    // issued on another node right after the answer (most likely in the same second): valid everywhere
    const { token: fresh } = await token(b, key, 'hank')
    for (const base of [a, b, c]) t.equal((await verify(base, fresh)).status, 200, 'a token issued after the revoke is valid')
  })

  await t.test('a node joining mid-stream, and one leaving', async (t) => {
    const { token: eveToken, user } = await token(a, key, 'eve')
    const joining = startNode('node-3', env())
    // changes keep coming while it starts
    for (let i = 0; i < 5; i++) {
      const r = await call(b, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: user.id })
      t.equal(r.status, 200)
    }
    const d = await joining
    nodes.push(d)
    t.equal((await verify(d.url, eveToken)).status, 401, 'the new node refuses the old token')
    const { token: fresh } = await token(d.url, key, 'eve')
    for (const base of [a, b, c, d.url]) t.equal((await verify(base, fresh)).status, 200)

    await d.stop()
    nodes = nodes.filter((n) => n !== d)
    const started = performance.now()
    t.equal((await call(a, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: user.id })).status, 200)
    t.comment(`first invalidation after a node left cleanly: ${(performance.now() - started).toFixed(1)} ms`)
    for (const base of [b, c]) t.equal((await verify(base, fresh)).status, 401)
  })

  const metrics = await call(a, 'GET', '/metrics')
  t.match(String(metrics.body), /chat_auth_bus_publishes_total\{outcome="acked"\} \d+/)
  t.match(String(metrics.body), /chat_auth_bus_ack_latency_seconds_bucket\{le="\+Inf"\} [1-9]/)
  t.match(String(metrics.body), /chat_auth_cache_fills_discarded_total/)
})
