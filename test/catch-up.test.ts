import { randomBytes } from 'node:crypto'
import t, { type Test } from 'tap'
import { pino } from 'pino'
import type { ChangeLog } from '../src/bus/bus.js'
import { deriveBusKeys } from '../src/bus/messages.js'
import { createRedisBus, type RedisBusOptions } from '../src/bus/redis-bus.js'
import { createStates } from '../src/cache/states.js'
import { createChanges } from '../src/changes.js'
import { Metrics } from '../src/metrics.js'
import { createPostgresDb, type Db } from '../src/store/db.js'
import { migrate } from '../src/store/migrate.js'
import { createStore, type Store } from '../src/store/store.js'
import { freshPostgresDatabase } from './support/databases.js'
import { waitFor } from './support/poll.js'
import { startTcpProxy } from './support/tcp-proxy.js'

/**
 * A reconnect is not a flush: a node whose subscriber connection went silent (its changes
 * lost on the way) comes back, reads what it missed from the store's change log, evicts
 * exactly that, and trusts the rest of its cache again. Real PostgreSQL and Redis; the
 * second test runs the chaos test's mutant (a catch-up that skips the window it was
 * away) and shows the same checks fail with it.
 */
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const LEASE_MS = 200
const logger = pino({ level: 'silent' })
const KEYS = deriveBusKeys([{ alg: 'HS256', secret: 'catch-up-test-secret-of-at-least-32-bytes' }])

async function scenario(t: Test, unsafe: Pick<RedisBusOptions, 'unsafeCatchUpSkipsWindow' | 'unsafeHorizonIgnoresOutbox'> = {}, catchUpLimit = 1000) {
  const db = createPostgresDb(await freshPostgresDatabase(t))
  t.teardown(() => db.close())
  await migrate(db)
  const store = createStore(db)
  const company = await store.createCompany('Acme')
  await store.createAgent(company.id, 'bot', true)
  const users = []
  for (const externalId of ['a', 'b', 'c']) users.push((await store.createUserIfAbsent(company.id, externalId, null))!)

  const prefix = `chat-auth-catch-up-${randomBytes(4).toString('hex')}`
  const changeLog: ChangeLog = { since: (horizon) => store.changesSince(horizon, catchUpLimit) }
  const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379))
  t.teardown(() => proxy.close())
  const bus = (url: string, metrics: Metrics, extra = {}) => createRedisBus({ url, leaseMs: LEASE_MS, logger, metrics, prefix, keys: KEYS, changeLog, horizonAdvanceMs: LEASE_MS, ...extra })
  const writerBus = bus(REDIS_URL, new Metrics())
  const readerMetrics = new Metrics()
  const readerBus = bus(`redis://127.0.0.1:${proxy.port}`, readerMetrics, unsafe)
  t.teardown(() => Promise.all([writerBus.close(), readerBus.close()]))
  const states = createStates(store, readerBus, 1000)
  const changes = createChanges({ store: store as Store, bus: writerBus })
  await Promise.all([writerBus.start(), readerBus.start()])
  return { db, store, company, users, proxy, readerBus, readerMetrics, states, changes }
}

/**
 * Waits until the server's snapshot xmin is above the transaction ids `sql` returns (the
 * largest of them). A horizon is that xmin, and a transaction open anywhere on the server
 * (another test file's, in the PostgreSQL pass) holds it back until it ends: a reader whose
 * horizon stayed below these rows would, rightly, read or flush what the test says it skips.
 */
async function serverXminPast(db: Db, what: string, sql: string) {
  await waitFor(what, async () => (await db.query<{ passed: boolean | null }>(`SELECT pg_snapshot_xmin(pg_current_snapshot()) > (${sql}) AS passed`))[0]!.passed, {
    until: (passed) => passed === true,
    timeoutMs: 30_000,
    everyMs: 20,
  })
}

const counter = async (metrics: Metrics, name: string) => Number((await metrics.render()).match(new RegExp(`^${name} (\\d+)$`, 'm'))?.[1] ?? 0)
/** Waits until the reader has tried to advance its horizon twice more (not failed): at least one read the store after now. */
async function horizonAdvancedAfterNow(metrics: Metrics, outcomes = ['advanced', 'held']) {
  const tries = async () => (await Promise.all(outcomes.map((o) => counter(metrics, `chat_auth_bus_horizon_advances_total\\{outcome="${o}"\\}`)))).reduce((a, b) => a + b, 0)
  const before = await tries()
  await waitFor('the horizon advance to run twice', async () => (await tries()) >= before + 2, { timeoutMs: 10_000, everyMs: 20 })
}
const caughtUpChanges = async (metrics: Metrics) => Number((await metrics.render()).match(/chat_auth_bus_catch_up_changes_total (\d+)/)?.[1] ?? 0)

t.test('a node cut off while a user is invalidated catches up on that user and keeps the rest of its cache', async (t) => {
  const s = await scenario(t)
  t.ok(s.readerBus.trusted(), 'the reader trusts its cache')
  for (const user of s.users) await s.states.user(user.id)
  t.equal(s.states.caches.users.size, 3, 'every user is cached')
  const epoch = s.readerBus.health().epoch

  t.equal(await s.proxy.blackhole(':sub:'), 1, "the reader's subscriber connection goes silent")
  const invalidated = (await s.changes.invalidateTokens(s.company.id, s.users[0]!.id))!
  t.equal(s.readerBus.trusted(), false, 'when the invalidation answers, the reader no longer trusts its cache')
  t.equal(s.states.caches.users.size, 3, 'and it kept its entries: it never heard of the change')

  await waitFor('the reader to reconnect, catch up and trust again', () => s.readerBus.trusted(), { timeoutMs: 10_000, everyMs: 5 })
  t.equal(s.readerBus.health().epoch, epoch, 'no flush: the same epoch')
  t.ok((await caughtUpChanges(s.readerMetrics)) >= 1, 'the change came from the change log')
  t.equal(s.states.caches.users.get(s.users[0]!.id), undefined, 'the invalidated user was evicted')
  t.ok(s.states.caches.users.get(s.users[1]!.id) && s.states.caches.users.get(s.users[2]!.id), 'the others stayed cached')
  const read = await s.states.user(s.users[0]!.id)
  t.equal(read?.tokenVersion, invalidated.tokenVersion, 'the next read has the new version')
})

t.test('the mutant catch-up that skips the window it was away serves the revoked version (the checks above bite)', async (t) => {
  const s = await scenario(t, { unsafeCatchUpSkipsWindow: true })
  for (const user of s.users) await s.states.user(user.id)
  await s.proxy.blackhole(':sub:')
  const invalidated = (await s.changes.invalidateTokens(s.company.id, s.users[0]!.id))!
  await waitFor('the reader to trust again', () => s.readerBus.trusted(), { timeoutMs: 10_000, everyMs: 5 })
  const served = await s.states.user(s.users[0]!.id)
  t.ok(served !== undefined && served.tokenVersion < invalidated.tokenVersion, `the mutant serves version ${served?.tokenVersion} after ${invalidated.tokenVersion} was acknowledged`)
})

t.test('after a subscription longer than the prune age and the row limit, a blip still catches up instead of flushing', { skip: 'the horizon moves while subscribed only with a catch-up that runs periodically' }, async (t) => {
  // Catch-up limit 3 rows; the log is pruned of rows older than 300 ms. Before the horizon
  // moved while subscribed, the horizon was the first subscription's, so this flushed.
  const s = await scenario(t, {}, 3)
  const epoch = s.readerBus.health().epoch
  for (let i = 0; i < 5; i++) await s.changes.invalidateTokens(s.company.id, s.users[2]!.id)
  await new Promise((resolve) => setTimeout(resolve, 400))
  t.ok((await s.store.pruneChangeLog(300)) >= 5, 'the changes made while subscribed were pruned from the log')
  await serverXminPast(s.db, 'the server\'s xmin to pass the pruned rows', 'SELECT through FROM change_log_pruned')
  await horizonAdvancedAfterNow(s.readerMetrics)
  for (const user of s.users) await s.states.user(user.id)
  t.equal(s.states.caches.users.size, 3, 'every user is cached')

  await s.proxy.blackhole(':sub:')
  const invalidated = (await s.changes.invalidateTokens(s.company.id, s.users[0]!.id))!
  t.equal(s.readerBus.trusted(), false, 'when the invalidation answers, the reader no longer trusts its cache')
  await waitFor('the reader to reconnect, catch up and trust again', () => s.readerBus.trusted(), { timeoutMs: 10_000, everyMs: 5 })
  t.equal(s.readerBus.health().epoch, epoch, 'no flush: the same epoch')
  t.ok((await counter(s.readerMetrics, 'chat_auth_bus_catch_ups_total\\{outcome="complete"\\}')) >= 1, 'the catch-up was complete')
  t.equal(await counter(s.readerMetrics, 'chat_auth_bus_catch_ups_total\\{outcome="incomplete"\\}'), 0, 'never incomplete')
  t.equal(s.states.caches.users.get(s.users[0]!.id), undefined, 'the invalidated user was evicted')
  t.ok(s.states.caches.users.get(s.users[1]!.id) && s.states.caches.users.get(s.users[2]!.id), 'the others stayed cached')
  t.equal((await s.states.user(s.users[0]!.id))?.tokenVersion, invalidated.tokenVersion, 'the old token version is refused: the next read has the new one')
})

/** A change committed whose publish never happened (nothing republishes it): the next catch-up has it. */
t.test('a change whose publish never happened reaches a node at its next catch-up', async (t) => {
  const s = await scenario(t)
  for (const user of s.users) await s.states.user(user.id)
  const unpublished = (await s.store.incrementTokenVersion(s.company.id, s.users[0]!.id))!
  await serverXminPast(s.db, 'the server\'s xmin to pass the unpublished change', 'SELECT max(xid) FROM change_log')
  t.ok(s.states.caches.users.get(s.users[0]!.id), 'the reader never heard of the change')
  await s.proxy.blackhole(':sub:')
  await waitFor('the reader to lose the channel', () => !s.readerBus.trusted(), { timeoutMs: 10_000, everyMs: 5 })
  await waitFor('the reader to reconnect, catch up and trust again', () => s.readerBus.trusted(), { timeoutMs: 10_000, everyMs: 5 })
  t.equal((await s.states.user(s.users[0]!.id))?.tokenVersion, unpublished.tokenVersion, 'after the blip the reader serves the new version')
})
