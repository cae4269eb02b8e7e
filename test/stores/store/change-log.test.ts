import pg from 'pg'
import t from 'tap'
import type { RowChanged } from '../../../src/domain.js'
import { createPostgresDb, type Db } from '../../../src/store/db.js'
import { createStore } from '../../../src/store/store.js'
import { generateApiKey } from '../../../src/auth/api-keys.js'
import { freshPostgresDatabase, sharedDb, storeIndependentTest } from '../../support/helpers.js'
import { waitFor } from '../../support/poll.js'
import { migrate } from '../../../src/store/migrate.js'

/**
 * The change log a node catches up from after its invalidation channel was lost
 * (migrations/003_change_log.sql, `changesSince` in src/store/change-log.ts): every publishing
 * write leaves a row in the same statement (record_change(), migrations/007_record_change.sql),
 * with its audit event and nothing else, and a read from the previous read's cursor (its
 * snapshot) returns every change committed since, and only those — including one whose
 * transaction took its number before, and committed after, a change the previous read
 * already returned, and none again while a transaction elsewhere holds the server's xmin back.
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
 * Reads from `from`, then from each read's cursor, until a read is complete and returns
 * nothing. A read is complete only when no row it had not seen was pruned at or above its
 * cursor's xmin, and a transaction open anywhere on the server (another test file's, in the
 * PostgreSQL pass) holds that xmin back: rightly incomplete then, but not what a test of
 * pruning counts.
 */
function quietRead(store: Store, from: string | undefined, what: string) {
  let cursor = from
  return waitFor(
    what,
    async () => {
      const read = await store.changesSince(cursor, LIMIT)
      cursor = read.cursor
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
  t.equal(first.complete, false, 'no cursor yet: the caller must flush')
  t.same(first.changes, [])

  const u0 = (await store.incrementTokenVersion(company.id, users[0]!.id))!
  const u1 = (await store.setUserActive(users[1]!.id, false))!
  const a = (await store.updateAgent(agent.id, { active: false }))!
  await store.revokeApiKey(keyId)
  const second = await store.changesSince(first.cursor, LIMIT)
  t.equal(second.complete, true)
  t.same(ids(second.changes), ids([
    { kind: 'user', id: u0.id, revision: u0.revision },
    { kind: 'user', id: u1.id, revision: u1.revision },
    { kind: 'agent', id: a.id, revision: a.revision },
    { kind: 'apiKey', id: keyId, revision: 1 },
  ]))

  const third = await store.changesSince(second.cursor, LIMIT)
  t.same(third.changes, [], 'nothing committed since the second read: none is returned again')
  t.equal(third.complete, true)

  const missed = await store.setUserAgent(users[2]!.id, agent.id)
  const fourth = await store.changesSince(third.cursor, LIMIT)
  t.same(ids(fourth.changes), [`user:${missed!.id}@${missed!.revision}`])

  t.equal((await store.changesSince(fourth.cursor, 0)).complete, true, 'nothing to read: complete even with no room')
  await store.incrementTokenVersion(company.id, users[0]!.id)
  await store.incrementTokenVersion(company.id, users[1]!.id)
  t.equal((await store.changesSince(fourth.cursor, 1)).complete, false, 'more than the limit: the caller flushes instead')
})

t.test('pruned rows make a read from before them incomplete; later cursors stay complete', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  const { store, users, company } = await tenant(db)
  const before = await store.changesSince(undefined, LIMIT)
  await store.incrementTokenVersion(company.id, users[0]!.id)
  const after = await store.changesSince(before.cursor, LIMIT)
  t.equal(after.changes.length, 1)
  t.equal(await store.pruneChangeLog(0), 1, 'the row is pruned')
  t.equal((await store.changesSince(before.cursor, LIMIT)).complete, false, 'a read from before the pruned row cannot prove it is complete')
  await store.incrementTokenVersion(company.id, users[1]!.id)
  const later = await quietRead(store, after.cursor, 'a cursor above the pruned row')
  t.equal(later.complete, true, 'a cursor taken after the pruned row is still complete')
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
  const order = await db.query<{ key: string }>(`SELECT key FROM change_log`)
  t.same(order.map((r) => r.key), [fast.id], 'only B is visible yet')

  const whileOpen = await store.changesSince(start.cursor, LIMIT)
  t.same(ids(whileOpen.changes), [`user:${fast.id}@${fast.revision}`], 'the read sees B only')
  await a.query('COMMIT')

  // seq: the id (a bigserial) of the change's event, written by the same statement
  const rows = await db.query<{ key: string; xid: string; seq: string }>(
    `SELECT l.key, l.xid::text AS xid, e.id::text AS seq FROM change_log l JOIN event e ON e.subject->>'id' = l.key`,
  )
  const of = (id: string) => rows.find((r) => r.key === id)!
  t.ok(BigInt(of(slow.id).xid) < BigInt(of(fast.id).xid), 'A holds the smaller transaction id…')
  t.ok(BigInt(of(slow.id).seq) < BigInt(of(fast.id).seq), '…and the smaller sequence number, yet committed after B')

  // The pitfall, shown on the same rows: "everything after the last number I saw" misses A.
  const naive = await db.query<{ key: string }>(`SELECT key FROM change_log WHERE xid > $1::xid8`, [of(fast.id).xid])
  t.same(naive.map((r) => r.key), [], 'a read after the highest number seen would have skipped A')

  const next = await store.changesSince(whileOpen.cursor, LIMIT)
  t.equal(next.complete, true)
  t.same(ids(next.changes), [`user:${slow.id}@${slow.revision}`], 'the read from the cursor returns A, and only A')
})

storeIndependentTest('a transaction held open elsewhere on the server makes no read return a change twice', async (t) => {
  const url = await freshPostgresDatabase(t)
  const db = createPostgresDb(url)
  t.teardown(() => db.close())
  await migrate(db)
  const { store, users, company } = await tenant(db)
  const idle = new pg.Client({ connectionString: url })
  await idle.connect()
  t.teardown(() => idle.end())
  const start = await store.changesSince(undefined, LIMIT)
  // An open transaction with an id: the server's xmin stays at or below it until it ends.
  await idle.query('BEGIN')
  const held = (await idle.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid')).rows[0]!.xid
  const changed = (await store.incrementTokenVersion(company.id, users[0]!.id))!
  const first = await store.changesSince(start.cursor, LIMIT)
  t.same(ids(first.changes), [`user:${changed.id}@${changed.revision}`], 'the change is read')
  const cursorXmin = BigInt(first.cursor.split(':')[0]!)
  t.ok(cursorXmin <= BigInt(held), 'the cursor\'s xmin is held back below the change by the open transaction')
  const again = await store.changesSince(first.cursor, LIMIT)
  t.same(again.changes, [], 'yet the next read does not return the change again')
  t.equal(again.complete, true)
  await idle.query('COMMIT')
})

/** Rows of every table a publishing write may record into. */
async function recorded(db: Db) {
  const [row] = await db.query<{ log: string | number; events: string | number }>(`SELECT (SELECT count(*) FROM change_log) AS log, (SELECT count(*) FROM event) AS events`)
  return { log: Number(row!.log), events: Number(row!.events) }
}

t.test('each publishing write records its change once, with its event when it has one, and no outbox row', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  t.same(await db.query(`SELECT to_regclass('change_outbox')::text AS outbox`), [{ outbox: null }], 'no outbox a write could record into (migration 013 dropped it)')
  const { store, company, agent, users, keyId } = await tenant(db)
  const exp = Math.floor(Date.now() / 1000) + 3600
  const as = (kind: string) => (r?: { id: string; revision: number }) => r && `${kind}:${r.id}@${r.revision}`
  const [user, agentRow, companyRow] = [as('user'), as('agent'), as('company')]
  const key = (k?: { keyId: string }) => k && `apiKey:${k.keyId}@1`
  const token = (r?: { jti: string; exp: number } | 'limit-reached' | 'expired') => (typeof r === 'object' ? `token:${r.jti}@${r.exp}` : r)
  // each write, the change it must record (kind:key@revision, from what it returned), and how many events
  const writes: Array<[string, () => Promise<string | undefined>, number]> = [
    ['incrementTokenVersion', () => store.incrementTokenVersion(company.id, users[0]!.id).then(user), 1],
    ['setUserActive', () => store.setUserActive(users[1]!.id, false).then(user), 1],
    ['setUserActive, the flag unchanged', () => store.setUserActive(users[1]!.id, false).then(user), 0],
    ['setUserAgent', () => store.setUserAgent(users[2]!.id, agent.id).then(user), 0],
    ['updateAgent, a rename', () => store.updateAgent(agent.id, { name: 'renamed' }).then(agentRow), 0],
    ['updateAgent, deactivated', () => store.updateAgent(agent.id, { active: false }).then(agentRow), 1],
    ['revokeAgentTokens', () => store.revokeAgentTokens(agent.id).then(agentRow), 1],
    ['revokeCompanyTokens', () => store.revokeCompanyTokens(company.id).then(companyRow), 1],
    ['revokeApiKey', () => store.revokeApiKey(keyId).then(key), 1],
    ['revokeApiKey, again', () => store.revokeApiKey(keyId).then(key), 0],
    ['revokeToken', () => store.revokeToken(company.id, 'jti-1', exp, users[0]!.id, { maxLive: 1, graceSeconds: 0 }).then(token), 1],
    ['revokeToken, again, at the limit', () => store.revokeToken(company.id, 'jti-1', exp, users[0]!.id, { maxLive: 1, graceSeconds: 0 }).then(token), 0],
  ]
  const start = await store.changesSince(undefined, LIMIT)
  const expected: string[] = []
  for (const [name, write, events] of writes) {
    const before = await recorded(db)
    const change = await write()
    t.ok(change, `${name} changed its row`)
    expected.push(change!)
    t.same(await recorded(db), { log: before.log + 1, events: before.events + events }, `${name}: one change_log row, ${events} event(s)`)
  }
  const read = await store.changesSince(start.cursor, LIMIT)
  t.same(ids(read.changes), expected.sort(), 'the log holds each change with the revision the write returned')

  const before = await recorded(db)
  const nobody = '00000000-0000-4000-8000-000000000000'
  t.equal(await store.incrementTokenVersion(company.id, nobody), undefined)
  t.equal(await store.incrementTokenVersion(nobody, users[0]!.id), undefined, 'a user of another company is no match')
  t.equal(await store.setUserActive(nobody, true), undefined)
  t.equal(await store.setUserAgent(nobody, agent.id), undefined)
  t.equal(await store.setUserAgent(users[1]!.id, agent.id), undefined, 'an inactive user is no match')
  t.equal(await store.updateAgent(nobody, { active: true }), undefined)
  t.equal(await store.revokeAgentTokens(nobody), undefined)
  t.equal(await store.revokeCompanyTokens(nobody), undefined)
  t.equal(await store.revokeApiKey('no-such-key'), undefined)
  t.equal(await store.revokeToken(nobody, 'jti-2', exp, users[0]!.id, { maxLive: 1, graceSeconds: 0 }), undefined)
  t.same(await recorded(db), before, 'a write that matched no row records nothing')
  t.equal(await store.revokeToken(company.id, 'jti-2', exp, users[0]!.id, { maxLive: 1, graceSeconds: 0 }), 'limit-reached', 'the company holds its one live revocation')
  t.same(await recorded(db), before, 'a revocation refused by the limit records nothing')
})

// One statement of the shape every publishing write has, over any number of users.
const RECORD_EACH = `WITH changed AS (
    UPDATE customer_user SET token_version = token_version + 1, revision = revision + 1
    WHERE company_id = $1 AND external_id = ANY($2::text[]) RETURNING id, revision)
  SELECT changed.id, record_change('user', id::text, revision, $3::uuid, 'tokens.invalidated', '{"kind":"admin"}', jsonb_build_object('kind', 'user', 'id', id), NULL)
  FROM changed`

t.test('record_change() runs once per row the write changed: never, once, or once each', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  const { company } = await tenant(db)
  for (const externalIds of [[], ['a'], ['a', 'b', 'c']]) {
    const before = await recorded(db)
    t.equal((await db.query(RECORD_EACH, [company.id, externalIds, company.id])).length, externalIds.length, `${externalIds.length} row(s) changed`)
    t.same(await recorded(db), { log: before.log + externalIds.length, events: before.events + externalIds.length }, 'as many change_log rows and events')
  }
})

t.test('a change, its change_log row and its event commit together or not at all', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  const { store, company, users } = await tenant(db)
  const before = await recorded(db)

  await db.withSession(async (session) => {
    await session.query('BEGIN')
    const inTransaction = createStore({ kind: db.kind, query: session.query, withSession: () => Promise.reject(new Error('not here')), close: async () => {} })
    t.equal((await inTransaction.incrementTokenVersion(company.id, users[0]!.id))?.tokenVersion, 1, 'written inside a transaction…')
    await session.query('ROLLBACK')
  })
  t.same(await recorded(db), before, '…and rolled back: no change_log row, no event')
  t.equal((await store.getUser(users[0]!.id))?.tokenVersion, 0, 'nor the change')

  // The event of a company that does not exist breaks its foreign key: the whole statement fails.
  await t.rejects(db.query(RECORD_EACH, [company.id, ['a'], '00000000-0000-4000-8000-000000000000']), 'a record that fails…')
  t.same(await recorded(db), before, '…leaves no change_log row')
  t.equal((await store.getUser(users[0]!.id))?.tokenVersion, 0, '…and undoes the change of its own statement')
})
