import t from 'tap'
import type { InvalidationBus } from '../src/bus/bus.js'
import type { Change } from '../src/domain.js'
import { createMemoryBus } from '../src/bus/memory-bus.js'
import { StoreUnavailableError } from '../src/errors.js'
import { createPostgresDb, type Db } from '../src/store/db.js'
import { migrate } from '../src/store/migrate.js'
import { createStore } from '../src/store/store.js'
import {
  createTenant,
  freshPostgresDatabase,
  invalidate,
  issueToken,
  sharedDb,
  startApp,
  STORE,
  storeIndependentTest,
  verify,
  type TestApp,
} from './support/helpers.js'
import { migratedPglite } from './support/pglite-template.js'
import { waitFor } from './support/poll.js'
import { startRedis, type RedisServer } from './support/services.js'
import { startTcpProxy } from './support/tcp-proxy.js'

/**
 * The change outbox: every publishing write leaves a change_outbox row in the same
 * statement; the writer deletes it once the bus confirmed the publish; the relay of any
 * node republishes (the current state of) rows a writer gave up on. Deadlines are
 * generous and nothing is timed: we only poll until something holds, or give up.
 */
// On PostgreSQL the tests run side by side: each has a database (and nodes) of its own and
// spends most of its time waiting for a relay. Not on PGlite: each would load a store of its
// own, a second of CPU apiece, and the tests there are short.
if (STORE === 'postgres') t.jobs = 4

/** the longest we wait for anything (waitFor's default deadline too) */
const DEADLINE_MS = 15_000

const outboxRows = async (db: Db) =>
  (await db.query<{ kind: string; key: string }>('SELECT kind, key FROM change_outbox ORDER BY id')).map((r) => `${r.kind}:${r.key}`)

const metric = async (node: TestApp, name: string): Promise<number> => {
  const line = (await node.gateway.metrics.render())
    .split('\n')
    .find((l) => l.startsWith(name + ' ') || l.startsWith(name + '{}'))
  return line === undefined ? Number.NaN : Number(line.split(' ').pop())
}


/** The in-process bus, with a switch that makes every publish fail like an unreachable Redis. */
function flakyBus(): InvalidationBus & { failing: boolean } {
  const inner = createMemoryBus()
  const bus = {
    ...inner,
    failing: false,
    async publish(change: Change) {
      if (bus.failing) throw new StoreUnavailableError('invalidation channel unavailable: publish not confirmed')
      await inner.publish(change)
    },
  }
  return bus
}

/** The in-process bus, whose next publish waits until the test releases it. */
function heldBus(): InvalidationBus & { hold(): { started: Promise<void>; release(): void } } {
  const inner = createMemoryBus()
  let gate: { start: () => void; released: Promise<void> } | undefined
  return {
    ...inner,
    hold() {
      let start!: () => void
      let release!: () => void
      const started = new Promise<void>((resolve) => (start = resolve))
      gate = { start, released: new Promise<void>((resolve) => (release = resolve)) }
      return { started, release }
    },
    async publish(change: Change) {
      const held = gate
      gate = undefined
      if (held) {
        held.start()
        await held.released
      }
      await inner.publish(change)
    },
  }
}

t.test(`[${STORE}] every publishing write leaves exactly one outbox row until it is announced`, async (t) => {
  const bus = heldBus()
  const node = await startApp(t, {}, { db: await sharedDb(t), bus })
  const { store, db, changes } = node.gateway
  const tenant = await createTenant(node)
  const other = (await node.admin('POST', `/admin/v1/companies/${tenant.companyId}/agents`, { name: 'second' })).json()
  const issued = await issueToken(node, tenant, 'alice')
  const userId = issued.user.id
  t.same(await outboxRows(db), [], 'creating companies, agents, keys and users publishes nothing')

  // Each write of `changes` commits (with its outbox row), publishes, and only then resolves.
  const writes = [
    { name: 'invalidateTokens', row: `user:${userId}`, write: () => changes.invalidateTokens(tenant.companyId, userId) },
    { name: 'setUserActive', row: `user:${userId}`, write: () => changes.setUserActive(userId, true) },
    { name: 'setUserAgent', row: `user:${userId}`, write: () => changes.setUserAgent(userId, other.id) },
    { name: 'updateAgent', row: `agent:${other.id}`, write: () => changes.updateAgent(other.id, { name: 'renamed' }) },
    { name: 'revokeApiKey', row: `apiKey:${tenant.keyId}`, write: () => changes.revokeApiKey(tenant.keyId) },
  ]
  for (const { name, row, write } of writes) {
    const publishing = bus.hold()
    const written = write()
    await publishing.started
    t.same(await outboxRows(db), [row], `${name}: one outbox row, committed with the change, while its publish is unconfirmed`)
    publishing.release()
    const record = (await written)!
    t.notOk('outboxId' in record, `${name} resolves with the committed record alone`)
    await waitFor(`${name}: the outbox row to go once announced`, () => outboxRows(db), { until: (rows) => rows.length === 0 })
  }
  t.pass('no row is left once each write was announced')

  // The store write alone returns its outbox id (what the relay and changes.ts rely on).
  const unannounced = (await store.incrementTokenVersion(tenant.companyId, userId))!
  t.match(unannounced.outboxId, /^\d+$/, 'a publishing store write returns its outbox id')
  await store.deleteOutbox([unannounced.outboxId])

  // Writes that change nothing leave nothing.
  t.equal(await store.incrementTokenVersion(tenant.companyId, '00000000-0000-4000-8000-000000000000'), undefined)
  t.equal(await store.revokeApiKey('ak_nope'), undefined)
  t.same(await outboxRows(db), [], 'a write that matched no row leaves no outbox row')

  // Through the HTTP API: the routes announce, so nothing stays behind.
  const tenant2 = await createTenant(node, 'Globex')
  const bob = await issueToken(node, tenant2, 'bob')
  t.equal((await invalidate(node, tenant2, bob.user.id)).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${bob.user.id}`, { active: false })).statusCode, 200)
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${tenant2.agentId}`, { active: false })).statusCode, 200)
  t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${tenant2.keyId}`)).statusCode, 200)
  await waitFor('the routes’ outbox rows to go', () => outboxRows(db), { until: (rows) => rows.length === 0 })
  t.pass('every route announces its write')
})

t.test(`[${STORE}] one node: a change whose publish failed reaches the cache through the relay`, async (t) => {
  const bus = flakyBus()
  // A row is the relay's once 500 ms old (not 2 s): each wait below for the relay is that
  // long; the verifications that must come before it follow their write within milliseconds.
  const node = await startApp(t, {}, { db: await sharedDb(t), bus, outboxRelay: { intervalMs: 50, minAgeMs: 500, maxBackoffMs: 200 } })
  const tenant = await createTenant(node)
  const { token, user } = await issueToken(node, tenant, 'carol')
  t.equal((await verify(node, token)).statusCode, 200, 'the token is good, and its user is cached')

  bus.failing = true
  const answer = await invalidate(node, tenant, user.id)
  t.equal(answer.statusCode, 503, 'the bus could not confirm the publish: the write answers 503')
  t.same(await outboxRows(node.gateway.db), [`user:${user.id}`], 'the change is committed, and so is its outbox row')
  t.equal((await verify(node, token)).statusCode, 200, 'the cache still holds the old state (the gap the outbox closes)')

  await waitFor('the relay to try, and fail, to republish it', () => metric(node, 'chat_auth_outbox_relay_failures_total'), { until: (count) => count >= 1 })
  t.equal((await verify(node, token)).statusCode, 200, 'still the old state while the bus is down')
  bus.failing = false
  await waitFor('the relay to republish the change', async () => (await verify(node, token)).statusCode, { until: (status) => status === 401 })
  t.equal((await verify(node, token)).json().code, 'TOKEN_REVOKED')
  await waitFor('the outbox to drain', () => outboxRows(node.gateway.db), { until: (rows) => rows.length === 0 })
  t.ok((await metric(node, 'chat_auth_outbox_republished_total')) >= 1, 'republished rows are counted')
  t.match(await node.gateway.metrics.render(), /chat_auth_outbox_backlog \d+/)

  // A writer that died between commit and publish: the store write alone, never announced.
  const dave = await issueToken(node, tenant, 'dave')
  t.equal((await verify(node, dave.token)).statusCode, 200)
  await node.gateway.store.setUserActive(dave.user.id, false)
  t.equal((await verify(node, dave.token)).statusCode, 200, 'cached: still accepted right after the unannounced commit')
  await waitFor('the relay to deliver the deactivation', async () => (await verify(node, dave.token)).statusCode, { until: (status) => status === 401 })
  t.equal((await verify(node, dave.token)).json().code, 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE')
})

storeIndependentTest('two nodes over PostgreSQL and Redis: changes a writer never published reach the other node', async (t) => {
  const redis: RedisServer = await startRedis()
  t.teardown(() => redis.stop())
  const proxy = await startTcpProxy(redis.port)
  t.teardown(() => proxy.close())
  const databaseUrl = await freshPostgresDatabase(t)
  const env = { DATABASE_URL: databaseUrl, CACHE_LEASE_MS: '500' }
  // The writer reaches Redis through a proxy the test controls; the reader directly. Relay
  // rounds every 100 ms rather than every second; rows still wait the nodes' own minimum
  // age (2 s): a blackholed writer answers 503 only after its publish timeout (1 s), and
  // the reader must not have the change from a relay by then.
  const relay = { outboxRelay: { intervalMs: 100 } }
  const writer = await startApp(t, { ...env, REDIS_URL: `redis://127.0.0.1:${proxy.port}` }, relay)
  const reader = await startApp(t, { ...env, REDIS_URL: redis.url }, relay)
  await waitFor('both nodes to trust their caches', () => writer.gateway.bus.trusted() && reader.gateway.bus.trusted())
  const tenant = await createTenant(writer)

  await t.test('the writer crashed between commit and publish', async (t) => {
    const { token, user } = await issueToken(writer, tenant, 'erin')
    t.equal((await verify(reader, token)).statusCode, 200, 'the reader caches the user')
    // The crashed writer: its own connection, the commit (with its outbox row), and nothing else.
    const crashed = createPostgresDb(databaseUrl)
    await createStore(crashed).incrementTokenVersion(tenant.companyId, user.id)
    await crashed.close()
    t.equal((await verify(reader, token)).statusCode, 200, 'right after the commit the reader still serves its cache')
    await waitFor('a relay to republish the change', async () => (await verify(reader, token)).statusCode, { until: (status) => status === 401 })
    t.equal((await verify(reader, token)).json().code, 'TOKEN_REVOKED')
    t.equal((await verify(writer, token)).statusCode, 401)
    await waitFor('the outbox to drain', () => outboxRows(reader.gateway.db), { until: (rows) => rows.length === 0 })
  })

  await t.test('a Redis blip on the writer: its write answers 503, the reader catches up anyway', async (t) => {
    const { token, user } = await issueToken(writer, tenant, 'frank')
    t.equal((await verify(reader, token)).statusCode, 200, 'the reader caches the user')
    t.equal(await proxy.blackhole(':cmd:'), 1, "the writer's command connection goes silent")
    const answer = await invalidate(writer, tenant, user.id)
    t.equal(answer.statusCode, 503, 'the publish could not be confirmed')
    t.equal((await verify(reader, token)).statusCode, 200, 'the reader still serves its cache (the gap)')
    await waitFor('the relay to republish the change', async () => (await verify(reader, token)).statusCode, { until: (status) => status === 401 })
    t.equal((await verify(reader, token)).json().code, 'TOKEN_REVOKED')
    await waitFor('the outbox to drain', () => outboxRows(reader.gateway.db), { until: (rows) => rows.length === 0 })
    t.ok((await metric(reader, 'chat_auth_outbox_republished_total')) + (await metric(writer, 'chat_auth_outbox_republished_total')) >= 2)
  })
})

t.test(`[${STORE}] the relay survives its database going away`, async (t) => {
  if (STORE === 'pglite') {
    const db = await migratedPglite()
    const node = await startApp(t, {}, { db, outboxRelay: { intervalMs: 50, maxBackoffMs: 200 } })
    const tenant = await createTenant(node)
    const { user } = await issueToken(node, tenant, 'gina')
    await node.gateway.store.incrementTokenVersion(tenant.companyId, user.id) // left for the relay
    await db.close()
    await waitFor('relay rounds to fail', () => metric(node, 'chat_auth_outbox_relay_failures_total'), { until: (count) => count >= 3 })
    t.ok(node.logs.some((l) => l.includes('outbox relay round failed') && l.includes('"level":40')), 'failures are logged at warn')
    const closing = Date.now()
    await node.app.close()
    t.ok(Date.now() - closing < DEADLINE_MS, 'and shutdown is not blocked')
    return
  }
  // PostgreSQL behind a proxy the test controls: refuse and reset every connection, then let them back.
  const url = new URL(await freshPostgresDatabase(t))
  const setup = createPostgresDb(url.toString())
  await migrate(setup)
  await setup.close()
  const proxy = await startTcpProxy(Number(url.port || 5432), url.hostname)
  t.teardown(() => proxy.close())
  url.port = String(proxy.port)
  // minAgeMs: the row must not be relayed in the moment between its commit and the proxy
  // cutting the database off (a second is ample), and every wait below for it lasts that long.
  const node = await startApp(t, { DATABASE_URL: url.toString() }, { outboxRelay: { intervalMs: 50, minAgeMs: 1000, maxBackoffMs: 200 } })
  const tenant = await createTenant(node)
  const { token, user } = await issueToken(node, tenant, 'gina')
  t.equal((await verify(node, token)).statusCode, 200, 'the user is cached')
  // A change committed and never announced; the database goes away before the relay may take it.
  await node.gateway.store.incrementTokenVersion(tenant.companyId, user.id)
  await proxy.refuse()
  await proxy.reset()
  await waitFor('relay rounds to fail', () => metric(node, 'chat_auth_outbox_relay_failures_total'), { until: (count) => count >= 3 })
  t.ok(node.logs.some((l) => l.includes('outbox relay round failed') && l.includes('"level":40')), 'failures are logged at warn')

  await proxy.accept()
  await waitFor('the relay to recover and deliver the change', async () => (await verify(node, token)).statusCode, { until: (status) => status === 401 })
  t.equal((await verify(node, token)).json().code, 'TOKEN_REVOKED')
  // (The node's claim on the database was lost with it and is back: its caches were flushed,
  // so the verify above may be 401 before the relay's round; the relay's own recovery follows.)
  await waitFor('the relay to log its recovery', () => node.logs.some((l) => l.includes('outbox relay recovered')))
  await waitFor('the outbox to drain', () => outboxRows(node.gateway.db), { until: (rows) => rows.length === 0 })
})
