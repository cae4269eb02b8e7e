import pg from 'pg'
import t from 'tap'
import type { RowChanged } from '../../src/domain.js'
import { createPostgresDb, type Db } from '../../src/store/db.js'
import { createStore } from '../../src/store/store.js'
import { generateApiKey } from '../../src/auth/api-keys.js'
import { freshPostgresDatabase, sharedDb, storeIndependentTest } from '../support/helpers.js'
import { waitFor } from '../support/poll.js'
import { migrate } from '../../src/store/migrate.js'

/**
 * The change log a node catches up from after its invalidation channel was lost
 * (migrations/003_change_log.sql, `changesSince` in src/store/store.ts): every publishing
 * write leaves a row in the same statement, and a read from the previous read's horizon
 * returns every change committed since — including one whose transaction took its number
 * before, and committed after, a change the previous read already returned.
 */
const LIMIT = 1000

async function tenant(db: Db) {
  const store = createStore(db)
  const company = await store.createCompany('Acme')
  const agent = (await store.createAgent(company.id, 'bot', true))!
  const users = []
  for (const externalId of ['a', 'b', 'c']) users.push((await store.createUserIfAbsent(company.id, externalId, null))!)
  const key = generateApiKey()
  await store.createApiKey(company.id, key.keyId, key.secretHash, 'k')
  return { store, company, agent, users, keyId: key.keyId }
}

type Store = ReturnType<typeof createStore>

/**
 * Reads from `from`, then from each read's horizon, until a read returns nothing: its horizon
 * is above every change made so far. A horizon is the xmin of the server's snapshot, so a
 * transaction open anywhere on the server (another test file's, in the PostgreSQL pass)
 * holds it below changes that committed long ago, and reads return those again until it
 * ends: more than once is what the catch-up is built for, but not what these tests count.
 */
function quietRead(store: Store, from: string | undefined, what: string) {
  let horizon = from
  return waitFor(
    what,
    async () => {
      const read = await store.changesSince(horizon, LIMIT)
      horizon = read.horizon
      return read
    },
    { until: (read) => read.complete && read.changes.length === 0, timeoutMs: 30_000, everyMs: 50 },
  )
}

const ids = (changes: RowChanged[]) => changes.map((c) => `${c.kind}:${c.id}@${c.revision}`).sort()

t.test('every publishing write is recorded with its revision; a read returns what committed since the last one', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  const { store, agent, users, keyId, company } = await tenant(db)

  const first = await store.changesSince(undefined, LIMIT)
  t.equal(first.complete, false, 'no horizon yet: the caller must flush')
  t.same(first.changes, [])

  const u0 = (await store.incrementTokenVersion(company.id, users[0]!.id))!
  const u1 = (await store.setUserActive(users[1]!.id, false))!
  const a = (await store.updateAgent(agent.id, { active: false }))!
  await store.revokeApiKey(keyId)
  const second = await store.changesSince(first.horizon, LIMIT)
  t.equal(second.complete, true)
  t.same(ids(second.changes), ids([
    { kind: 'user', id: u0.id, revision: u0.revision },
    { kind: 'user', id: u1.id, revision: u1.revision },
    { kind: 'agent', id: a.id, revision: a.revision },
    { kind: 'apiKey', id: keyId, revision: 1 },
  ]))

  // a store whose reads ignored the horizon would return these four forever: it times out
  const third = await quietRead(store, second.horizon, 'a read after the second that returns nothing')
  t.same(third.changes, [], 'nothing committed since the second read')
  t.equal(third.complete, true)

  const missed = await store.setUserAgent(users[2]!.id, agent.id)
  const fourth = await store.changesSince(third.horizon, LIMIT)
  t.same(ids(fourth.changes), [`user:${missed!.id}@${missed!.revision}`])

  const quiet = await quietRead(store, fourth.horizon, 'a horizon above the missed change')
  t.equal((await store.changesSince(quiet.horizon, 0)).complete, true, 'nothing to read: complete even with no room')
  await store.incrementTokenVersion(company.id, users[0]!.id)
  await store.incrementTokenVersion(company.id, users[1]!.id)
  t.equal((await store.changesSince(fourth.horizon, 1)).complete, false, 'more than the limit: the caller flushes instead')
})

t.test('pruned rows make a read from before them incomplete; later horizons stay complete', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  const { store, users, company } = await tenant(db)
  const before = await store.changesSince(undefined, LIMIT)
  await store.incrementTokenVersion(company.id, users[0]!.id)
  const after = await store.changesSince(before.horizon, LIMIT)
  t.equal(after.changes.length, 1)
  t.equal(await store.pruneChangeLog(0), 1, 'the row is pruned')
  t.equal((await store.changesSince(before.horizon, LIMIT)).complete, false, 'a read from before the pruned row cannot prove it is complete')
  await store.incrementTokenVersion(company.id, users[1]!.id)
  const later = await quietRead(store, after.horizon, 'a horizon above the pruned row')
  t.equal(later.complete, true, 'a horizon taken after the pruned row is still complete')
  t.equal(await store.pruneChangeLog(60_000), 0, 'recent rows are kept')
})

/** A Db on one client inside an open transaction: the store's own statements, uncommitted. */
function inTransaction(client: pg.Client): Db {
  return {
    kind: 'postgres',
    query: async <Row>(sql: string, params?: readonly unknown[]) => (await client.query(sql, params as unknown[])).rows as Row[],
    withSession: () => Promise.reject(new Error('not here')),
    close: async () => {},
  }
}

storeIndependentTest('commit order: a transaction that took its number first and committed last is not skipped', async (t) => {
  const url = await freshPostgresDatabase(t)
  const db = createPostgresDb(url)
  t.teardown(() => db.close())
  await migrate(db)
  const { store, users, company } = await tenant(db)
  const a = new pg.Client({ connectionString: url })
  const b = new pg.Client({ connectionString: url })
  await Promise.all([a.connect(), b.connect()])
  t.teardown(() => Promise.all([a.end(), b.end()]))

  const start = await store.changesSince(undefined, LIMIT)
  // A takes its transaction id and its log row first, and stays open…
  await a.query('BEGIN')
  const slow = (await createStore(inTransaction(a)).incrementTokenVersion(company.id, users[0]!.id))!
  // …B starts later, so gets higher numbers, and commits first.
  await b.query('BEGIN')
  const fast = (await createStore(inTransaction(b)).incrementTokenVersion(company.id, users[1]!.id))!
  await b.query('COMMIT')
  const order = await db.query<{ key: string; xid: string; seq: string }>(
    `SELECT key, xid::text AS xid, (SELECT id FROM change_outbox o WHERE o.key = l.key)::text AS seq FROM change_log l`,
  )
  t.same(order.map((r) => r.key), [fast.id], 'only B is visible yet')

  const whileOpen = await store.changesSince(start.horizon, LIMIT)
  t.same(ids(whileOpen.changes), [`user:${fast.id}@${fast.revision}`], 'the read sees B only')
  await a.query('COMMIT')

  const rows = await db.query<{ key: string; xid: string; seq: string }>(
    `SELECT l.key, l.xid::text AS xid, o.id::text AS seq FROM change_log l JOIN change_outbox o ON o.key = l.key`,
  )
  const of = (id: string) => rows.find((r) => r.key === id)!
  t.ok(BigInt(of(slow.id).xid) < BigInt(of(fast.id).xid), 'A holds the smaller transaction id…')
  t.ok(BigInt(of(slow.id).seq) < BigInt(of(fast.id).seq), '…and the smaller sequence number, yet committed after B')

  // The pitfall, shown on the same rows: "everything after the last number I saw" misses A.
  const naive = await db.query<{ key: string }>(`SELECT key FROM change_log WHERE xid > $1::xid8`, [of(fast.id).xid])
  t.same(naive.map((r) => r.key), [], 'a read after the highest number seen would have skipped A')

  const next = await store.changesSince(whileOpen.horizon, LIMIT)
  t.equal(next.complete, true)
  t.ok(ids(next.changes).includes(`user:${slow.id}@${slow.revision}`), 'the read from the horizon returns A')
})

t.test('horizonBound: the snapshot xmin, the smallest xid of an unconfirmed change, and rows without one', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  const { store, company, users } = await tenant(db)
  for (const row of await store.dueOutbox(-1_000_000, 1000)) await store.deleteOutbox([row.id])

  const empty = await store.horizonBound()
  t.equal(empty.outboxXmin, undefined, 'no outbox row: nothing unconfirmed')
  t.equal(empty.outboxWithoutXid, false)
  const written = (await store.incrementTokenVersion(company.id, users[0]!.id))!
  const pending = await store.horizonBound()
  t.ok(pending.outboxXmin !== undefined && BigInt(pending.outboxXmin) >= BigInt(empty.snapshotXmin), 'the unconfirmed change has an xid at or above the earlier xmin')
  await store.deleteOutbox([written.outboxId])
  t.equal((await store.horizonBound()).outboxXmin, undefined, 'confirmed: the bound is the snapshot again')

  await db.query(`INSERT INTO change_outbox (kind, key, xid) VALUES ('user', 'old', NULL)`)
  t.equal((await store.horizonBound()).outboxWithoutXid, true, 'a row from before migration 006 has no xid: nothing is known')
})
