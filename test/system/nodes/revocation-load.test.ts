import t from 'tap'
import pg from 'pg'
import { createTenant, freshPostgresDatabase, issueToken, post, startApp, storeIndependentTest, verify, type TestApp } from '../../support/helpers.js'
import { waitFor } from '../../support/poll.js'

/**
 * A node started on a store full of single-token revocations (issue: a node restarted on
 * millions of them loaded them all at once, served at a crawl, started a second full read
 * when the first timed out, and said "ready" throughout). The node loads them in pages, one
 * load at a time, never because a question came; it says "not ready" until the load is in,
 * and refuses a revoked token all along.
 */
const metric = async (node: TestApp, line: string): Promise<number> => {
  const found = (await node.gateway.metrics.render()).split('\n').find((l) => l.startsWith(line + ' '))
  return found === undefined ? 0 : Number(found.split(' ').pop())
}
const failedLoads = (node: TestApp) => metric(node, 'chat_auth_revocation_loads_total{result="failed"}')

async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

storeIndependentTest('a node restarted on 20,000 live revocations: not ready until they are loaded, refusing the revoked token throughout', async (t) => {
  const databaseUrl = await freshPostgresDatabase(t)
  const first = await startApp(t, { DATABASE_URL: databaseUrl })
  const tenant = await createTenant(first)
  const revoked = await issueToken(first, tenant, 'rita')
  const kept = await issueToken(first, tenant, 'kim')
  t.equal((await post(first, '/rest/v1/auth/revoke-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, token: revoked.token })).statusCode, 200)
  await withClient(databaseUrl, (client) =>
    client.query(`INSERT INTO revoked_token (jti, company_id, expires_at) SELECT gen_random_uuid()::text, $1, now() + interval '1 hour' FROM generate_series(1, 20000)`, [tenant.companyId]),
  )
  await first.app.close()

  // Small pages make the load take long enough to be seen: hundreds of short queries.
  const node = await startApp(t, { DATABASE_URL: databaseUrl }, { parts: { revokedTokens: { pageSize: 40 } } })
  const early = await node.inject({ method: 'GET', url: '/readyz' })
  t.equal(early.statusCode, 503, 'not ready while the revocations load')
  t.equal(early.json().revocationsLoaded, false, 'and /readyz says why')
  t.equal((await verify(node, revoked.token)).statusCode, 401, 'the revoked token is refused during the load (a store read)')
  t.equal((await verify(node, kept.token)).statusCode, 200, 'another token of the company is accepted')
  const ready = await waitFor('the node to be ready', async () => (await node.inject({ method: 'GET', url: '/readyz' })).json(), { until: (body) => body.status === 'ready', timeoutMs: 60_000 })
  t.equal(ready.revocationsLoaded, true)
  t.equal(await metric(node, 'chat_auth_revocation_filter_entries'), 20_001, 'every live revocation is in the filter')
  t.equal((await verify(node, revoked.token)).json().code, 'TOKEN_REVOKED', 'refused once loaded')
  const reads = await metric(node, 'chat_auth_revocation_store_reads_total')
  for (let i = 0; i < 20; i++) t.equal((await verify(node, kept.token)).statusCode, 200)
  t.equal(await metric(node, 'chat_auth_revocation_store_reads_total'), reads, 'an unrevoked token costs no store read once the filter is in')
})

storeIndependentTest('a load that fails is tried again on a timer, not by every verification', async (t) => {
  const databaseUrl = await freshPostgresDatabase(t)
  const first = await startApp(t, { DATABASE_URL: databaseUrl })
  const tenant = await createTenant(first)
  const { token } = await issueToken(first, tenant, 'una')
  await first.app.close()
  // The table goes away under the node: each load fails (and so does each store read).
  await withClient(databaseUrl, (client) => client.query('ALTER TABLE revoked_token RENAME TO revoked_token_away'))
  const node = await startApp(t, { DATABASE_URL: databaseUrl })
  await waitFor('the first load to fail', () => failedLoads(node), { until: (n) => n >= 1 })
  for (let i = 0; i < 30; i++) t.equal((await verify(node, token)).statusCode, 503, 'the store cannot answer: 503, never 200')
  t.ok((await failedLoads(node)) <= 3, `30 verifications started no load of their own (${await failedLoads(node)} failed loads)`)
  t.equal((await node.inject({ method: 'GET', url: '/readyz' })).statusCode, 503, 'not ready')
  await withClient(databaseUrl, (client) => client.query('ALTER TABLE revoked_token_away RENAME TO revoked_token'))
  await waitFor('the retried load to succeed', async () => (await node.inject({ method: 'GET', url: '/readyz' })).statusCode, { until: (status) => status === 200, timeoutMs: 60_000 })
  t.equal((await verify(node, token)).statusCode, 200)
  t.ok(node.logs.some((line) => line.includes('revoked tokens could not be loaded')), 'the failure was logged')
})

t.pass('loaded')
