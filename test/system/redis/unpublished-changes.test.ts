import t from 'tap'
import { createPostgresDb } from '../../../src/store/db.js'
import { migrate } from '../../../src/store/migrate.js'
import { createStore } from '../../../src/store/store.js'
import { createTenant, freshPostgresDatabase, invalidate, issueToken, startApp, storeIndependentTest, verify, type TestApp } from '../../support/helpers.js'
import { waitFor } from '../../support/poll.js'
import { startRedis, type RedisServer } from '../../support/services.js'
import { startTcpProxy } from '../../support/tcp-proxy.js'

/**
 * A change that committed but was never published — its writer died between commit and
 * publish, or its publish could not be confirmed (the write answered 503) — still reaches
 * every node: each subscribed node reads the change log again every period (bus/catch-up.ts).
 * Nothing is timed here: we poll until something holds, or give up.
 */
const metric = async (node: TestApp, name: string): Promise<number> => {
  const line = (await node.gateway.metrics.render()).split('\n').find((l) => l.startsWith(name + ' ') || l.startsWith(name + '{'))
  return line === undefined ? 0 : Number(line.split(' ').pop())
}
const fromTheLog = (node: TestApp) => metric(node, 'chat_auth_bus_catch_up_changes_total')

storeIndependentTest('two nodes over PostgreSQL and Redis: changes a writer never published reach every node', async (t) => {
  const redis: RedisServer = await startRedis()
  t.teardown(() => redis.stop())
  const proxy = await startTcpProxy(redis.port)
  t.teardown(() => proxy.close())
  const databaseUrl = await freshPostgresDatabase(t)
  const env = { DATABASE_URL: databaseUrl, CACHE_LEASE_MS: '500' }
  // The writer reaches Redis through a proxy the test controls; the reader directly.
  const writer = await startApp(t, { ...env, REDIS_URL: `redis://127.0.0.1:${proxy.port}` })
  const reader = await startApp(t, { ...env, REDIS_URL: redis.url })
  await waitFor('both nodes to trust their caches', () => writer.gateway.bus.trusted() && reader.gateway.bus.trusted())
  const tenant = await createTenant(writer)

  await t.test('the writer died between commit and publish', async (t) => {
    const { token, user } = await issueToken(writer, tenant, 'erin')
    t.equal((await verify(reader, token)).statusCode, 200, 'the reader caches the user')
    t.equal((await verify(writer, token)).statusCode, 200, 'and so does the writer')
    const before = await fromTheLog(reader)
    // The dead writer: its own connection, the commit, and nothing else.
    const dead = createPostgresDb(databaseUrl)
    await createStore(dead).incrementTokenVersion(tenant.companyId, user.id)
    await dead.close()
    await waitFor('the reader to read the change from the log', async () => (await verify(reader, token)).statusCode, { until: (status) => status === 401 })
    t.equal((await verify(reader, token)).json().code, 'TOKEN_REVOKED', 'refused as revoked')
    // Read from the log, not published: on a loaded machine the reader's lease can lapse for a
    // moment, and it then answers from the store first and reads the log when it catches up.
    await waitFor('the reader to count the change read from the change log', () => fromTheLog(reader), { until: (count) => count > before })
    t.pass('the change came from the change log, not from a publish')
    await waitFor('the writer node to read it too', async () => (await verify(writer, token)).statusCode, { until: (status) => status === 401 })
    t.ok(reader.gateway.bus.trusted(), 'with no blip and no flush: the reader still trusts its cache')
  })

  await t.test("a Redis blip on the writer: its write answers 503, and every node refuses the token anyway", async (t) => {
    const { token, user } = await issueToken(writer, tenant, 'frank')
    t.equal((await verify(reader, token)).statusCode, 200, 'the reader caches the user')
    t.equal(await proxy.blackhole(':cmd:'), 1, "the writer's command connection goes silent")
    const answer = await invalidate(writer, tenant, user.id)
    t.equal(answer.statusCode, 503, 'the publish could not be confirmed: the write answers 503, although it committed')
    await waitFor('the reader to read the change from the log', async () => (await verify(reader, token)).statusCode, { until: (status) => status === 401 })
    t.equal((await verify(reader, token)).json().code, 'TOKEN_REVOKED', 'refused as revoked')
    t.equal((await verify(writer, token)).statusCode, 401, 'the writer applied its own change at once')
  })
})

storeIndependentTest('reads of the change log survive their database going away, and deliver once it is back', async (t) => {
  const redis = await startRedis()
  t.teardown(() => redis.stop())
  // PostgreSQL behind a proxy the test controls: refuse and reset every connection, then let them back.
  const url = new URL(await freshPostgresDatabase(t))
  const direct = createPostgresDb(url.toString())
  t.teardown(() => direct.close())
  await migrate(direct)
  const proxy = await startTcpProxy(Number(url.port || 5432), url.hostname)
  t.teardown(() => proxy.close())
  url.port = String(proxy.port)
  const node = await startApp(t, { DATABASE_URL: url.toString(), REDIS_URL: redis.url, CACHE_LEASE_MS: '500' })
  await waitFor('the node to trust its cache', () => node.gateway.bus.trusted())
  const tenant = await createTenant(node)
  const { token, user } = await issueToken(node, tenant, 'gina')
  t.equal((await verify(node, token)).statusCode, 200, 'the user is cached')

  await proxy.refuse()
  await proxy.reset()
  // A change committed and never announced, while the node cannot read the database.
  await createStore(direct).incrementTokenVersion(tenant.companyId, user.id)
  const failures = () => metric(node, 'chat_auth_bus_periodic_catch_ups_total{outcome="failed"}')
  await waitFor('reads of the log to fail', failures, { until: (count) => count >= 2 })
  t.ok(node.logs.some((l) => l.includes('reading the change log failed') && l.includes('"level":40')), 'failures are logged at warn')

  await proxy.accept()
  await waitFor('the change to be delivered once the database is back', async () => (await verify(node, token)).statusCode, { until: (status) => status === 401 })
  t.equal((await verify(node, token)).json().code, 'TOKEN_REVOKED', 'refused as revoked')
})
