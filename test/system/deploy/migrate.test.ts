import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import t, { type Test } from 'tap'
import { createPostgresDb, type Db } from '../../../src/store/db.js'
import { migrate, MIGRATIONS_DIR } from '../../../src/store/migrate.js'
import { freshPostgresDatabase } from '../../support/databases.js'
import { migratedPglite } from '../../support/pglite-template.js'

const files = readdirSync(MIGRATIONS_DIR).filter((name) => /^\d+_.+\.sql$/.test(name)).sort()

/**
 * After 007, as a node of the previous version sees the store: the very statement its
 * horizon advance read (`horizonBound` then), the outbox rows its relay would republish (it
 * knew these kinds only, and left any other in place), and the change log new nodes read.
 */
async function previousVersionView(t: Test, db: Db) {
  const [bound] = await db.query<{ snapshot: string; outbox: string | null; unknown: boolean }>(
    `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS snapshot,
            (SELECT min(xid) FROM change_outbox)::text AS outbox,
            EXISTS (SELECT 1 FROM change_outbox WHERE xid IS NULL) AS unknown`,
  )
  t.equal(bound!.unknown, true, 'outboxWithoutXid: an old node holds its horizon (007\'s row)')
  t.equal(bound!.outbox, null)
  t.same(await db.query(`SELECT kind FROM change_outbox WHERE kind IN ('user', 'agent', 'apiKey', 'company', 'token')`), [], "no row an old node's relay would republish and delete")
  t.same(await db.query(`SELECT kind, key FROM change_log`), [], 'and nothing in the change log: the row is no change')
}

t.test('four nodes migrating one PostgreSQL at once apply each migration exactly once', async (t) => {
  const url = await freshPostgresDatabase(t)
  const dbs = Array.from({ length: 4 }, () => createPostgresDb(url))
  t.teardown(() => Promise.all(dbs.map((db) => db.close())))
  const results = await Promise.all(dbs.map((db) => migrate(db)))
  t.same(results.flatMap((r) => r.applied).sort(), files, 'every file applied once across the four, none twice')
  const rows = await dbs[0]!.query<{ name: string }>('SELECT name FROM schema_migration ORDER BY version')
  t.same(rows.map((r) => r.name), files)
  t.same(await migrate(dbs[1]!), { applied: [] }, 'a later run has nothing to do')
  await outboxGone(t, dbs[0]!)
})

/**
 * 014: change_outbox is dropped, with the trigger and function of 003 that logged its rows
 * and the xid column of 006: nothing has written or read it since 007.
 */
async function outboxGone(t: Test, db: Db) {
  t.same(await db.query(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name LIKE 'change_outbox%'`), [], 'no change_outbox table')
  t.same(await db.query(`SELECT proname FROM pg_proc WHERE proname LIKE 'change_outbox%'`), [], 'nor the function that logged its rows')
  t.same(await db.query(`SELECT tgname FROM pg_trigger WHERE tgname LIKE 'change_outbox%'`), [], 'nor its trigger')
  // what the nodes write instead: record_change(), into change_log
  await db.query(`SELECT record_change('user', 'k-014', 7, NULL, NULL, NULL, NULL, NULL)`)
  t.same(await db.query(`SELECT kind, key, revision::int AS revision FROM change_log WHERE key = 'k-014'`), [{ kind: 'user', key: 'k-014', revision: 7 }], 'changes are still logged')
}

t.test('up to 013, a node of the version before 007 saw the outbox hold its horizon; 014 drops the outbox', async (t) => {
  const db = createPostgresDb(await freshPostgresDatabase(t))
  t.teardown(() => db.close())
  const before014 = mkdtempSync(join(tmpdir(), 'migrations-'))
  t.teardown(() => rmSync(before014, { recursive: true, force: true }))
  for (const file of files.filter((name) => Number.parseInt(name, 10) < 14)) copyFileSync(join(MIGRATIONS_DIR, file), join(before014, file))
  await migrate(db, before014)
  await previousVersionView(t, db)
  t.same(await migrate(db), { applied: files.filter((name) => Number.parseInt(name, 10) >= 14) })
  t.ok(files.some((name) => name.startsWith('014_drop_change_outbox')), 'there is a 014')
  await outboxGone(t, db)
})

t.test('008 counts the revocations each company already holds, and the count follows every insert and delete', async (t) => {
  const db = createPostgresDb(await freshPostgresDatabase(t))
  t.teardown(() => db.close())
  // The store as nodes of the previous version left it: migrated up to 007, with revocations.
  const before008 = mkdtempSync(join(tmpdir(), 'migrations-'))
  t.teardown(() => rmSync(before008, { recursive: true, force: true }))
  for (const file of files.filter((name) => Number.parseInt(name, 10) < 8)) copyFileSync(join(MIGRATIONS_DIR, file), join(before008, file))
  await migrate(db, before008)
  const [a, b, c] = ['00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-00000000000b', '00000000-0000-4000-8000-00000000000c']
  await db.query(`INSERT INTO company (id, name) VALUES ($1, 'a'), ($2, 'b'), ($3, 'c')`, [a, b, c])
  // What a node of the previous version writes (its revoke-token's insert), and later prunes.
  const revokeAsBefore = (jti: string, company: string, expired = false) =>
    db.query(`INSERT INTO revoked_token (jti, company_id, expires_at) VALUES ($1, $2, now() + ($3 || ' hours')::interval)`, [jti, company, expired ? '-1' : '1'])
  for (const jti of ['a1', 'a2', 'a3']) await revokeAsBefore(jti, a, jti === 'a3')
  await revokeAsBefore('b1', b)
  t.same(await migrate(db), { applied: files.filter((name) => Number.parseInt(name, 10) >= 8) })

  const counts = async () =>
    Object.fromEntries((await db.query<{ id: string; n: number }>('SELECT id, live_token_revocations AS n FROM company ORDER BY id')).map((row) => [row.id.slice(-1), row.n]))
  t.same(await counts(), { a: 3, b: 1, c: 0 }, 'initialised from the rows')
  await revokeAsBefore('c1', c)
  await revokeAsBefore('a1', a).catch(() => undefined)
  t.same(await counts(), { a: 3, b: 1, c: 1 }, "an insert without the company's lock is counted; a failed one is not")
  await db.query(`DELETE FROM revoked_token WHERE expires_at <= now()`)
  t.same(await counts(), { a: 2, b: 1, c: 1 }, "a previous version's prune lowers the count")
  await db.query(`DELETE FROM revoked_token WHERE jti IN ('a1', 'b1', 'c1')`)
  t.same(await counts(), { a: 1, b: 0, c: 0 }, 'one statement deleting rows of several companies')
  await db.query('TRUNCATE revoked_token')
  t.same(await counts(), { a: 0, b: 0, c: 0 }, 'TRUNCATE empties every count')
})

t.test("012 counts the users each company already holds, and the count follows every insert and delete", async (t) => {
  const db = createPostgresDb(await freshPostgresDatabase(t))
  t.teardown(() => db.close())
  // The store as nodes of the previous version left it: migrated up to 011, with users.
  const before012 = mkdtempSync(join(tmpdir(), 'migrations-'))
  t.teardown(() => rmSync(before012, { recursive: true, force: true }))
  for (const file of files.filter((name) => Number.parseInt(name, 10) < 12)) copyFileSync(join(MIGRATIONS_DIR, file), join(before012, file))
  await migrate(db, before012)
  const [a, b, c] = ['00000000-0000-4000-8000-00000000000a', '00000000-0000-4000-8000-00000000000b', '00000000-0000-4000-8000-00000000000c']
  await db.query(`INSERT INTO company (id, name) VALUES ($1, 'a'), ($2, 'b'), ($3, 'c')`, [a, b, c])
  const agents = Object.fromEntries(
    await Promise.all(
      [a, b, c].map(async (company) => [company, (await db.query<{ id: string }>(`INSERT INTO agent (id, company_id, name) VALUES (gen_random_uuid(), $1, 'bot') RETURNING id`, [company]))[0]!.id]),
    ),
  )
  // What a node of the previous version writes: its token path's insert.
  const createAsBefore = (externalId: string, company: string) =>
    db.query(`INSERT INTO customer_user (id, company_id, external_id, agent_id) VALUES (gen_random_uuid(), $1, $2, $3) ON CONFLICT DO NOTHING`, [company, externalId, agents[company]])
  for (const externalId of ['a1', 'a2', 'a3']) await createAsBefore(externalId, a)
  await createAsBefore('b1', b)
  t.same(await migrate(db), { applied: files.filter((name) => Number.parseInt(name, 10) >= 12) })

  const counts = async () => Object.fromEntries((await db.query<{ id: string; n: number }>('SELECT id, user_count AS n FROM company ORDER BY id')).map((row) => [row.id.slice(-1), row.n]))
  t.same(await counts(), { a: 3, b: 1, c: 0 }, 'initialised from the rows')
  await createAsBefore('c1', c)
  await createAsBefore('a1', a)
  t.same(await counts(), { a: 3, b: 1, c: 1 }, "an insert without the company's lock is counted; one that inserted nothing is not")
  const created = await db.query<{ outcome: string }>(`SELECT outcome FROM create_customer_user(gen_random_uuid(), $1, 'c2', $2, 10, 10, 2)`, [c, agents[c]])
  t.same(created, [{ outcome: 'created' }])
  t.same(await db.query(`SELECT outcome FROM create_customer_user(gen_random_uuid(), $1, 'c3', $2, 10, 10, 2)`, [c, agents[c]]), [{ outcome: 'user-limit' }], 'the count is what the limit reads')
  t.same(await db.query(`SELECT outcome FROM create_customer_user(gen_random_uuid(), $1, 'a1', $2, 10, 10, 2)`, [a, agents[a]]), [{ outcome: 'exists' }], 'an existing user past the limit: found, not refused')
  await db.query(`DELETE FROM customer_user WHERE external_id IN ('a1', 'b1', 'c1')`)
  t.same(await counts(), { a: 2, b: 0, c: 1 }, 'one statement deleting rows of several companies')
  await db.query('TRUNCATE customer_user')
  t.same(await counts(), { a: 0, b: 0, c: 0 }, 'TRUNCATE empties every count')
})

// One migrated PGlite store for the two PGlite tests (loading one costs a second of CPU):
// the first writes a row into it, the second drops what the migrations made and applies them.
const lite = migratedPglite()
t.teardown(async () => (await lite).close())

t.test('token_version never decreases, whatever writes the row', async (t) => {
  const db = await lite
  await db.query(`INSERT INTO company (id, name) VALUES ('00000000-0000-4000-8000-000000000001', 'c')`)
  await db.query(`INSERT INTO agent (id, company_id, name) VALUES ('00000000-0000-4000-8000-000000000002', '00000000-0000-4000-8000-000000000001', 'a')`)
  await db.query(
    `INSERT INTO customer_user (id, company_id, external_id, agent_id, token_version)
     VALUES ('00000000-0000-4000-8000-000000000003', '00000000-0000-4000-8000-000000000001', 'u', '00000000-0000-4000-8000-000000000002', 5)`,
  )
  await t.rejects(db.query(`UPDATE customer_user SET token_version = 4`), /may not decrease/)
  t.same(await db.query(`SELECT token_version FROM customer_user`), [{ token_version: 5 }])
})

t.test('the same files apply to PGlite, idempotently', async (t) => {
  // The migrated store with everything the migrations made dropped (they make nothing
  // outside the public schema): a fresh one would cost initdb in WASM, 5 s of CPU.
  const db = await lite
  await db.query('DROP SCHEMA public CASCADE')
  await db.query('CREATE SCHEMA public')
  const publicTables = async () =>
    (await db.query<{ table_name: string }>(`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`)).map((r) => r.table_name)
  t.same(await publicTables(), [], 'the store starts without any table')
  // up to 013 first: the store as the nodes before 014 left it, as one of the version before 007 saw it
  const before014 = mkdtempSync(join(tmpdir(), 'migrations-'))
  t.teardown(() => rmSync(before014, { recursive: true, force: true }))
  for (const file of files.filter((name) => Number.parseInt(name, 10) < 14)) copyFileSync(join(MIGRATIONS_DIR, file), join(before014, file))
  const upTo013 = (await migrate(db, before014)).applied
  await previousVersionView(t, db)
  t.same([...upTo013, ...(await migrate(db)).applied], files)
  t.same((await migrate(db)).applied, [])
  t.same(await publicTables(), ['agent', 'api_key', 'change_log', 'change_log_pruned', 'company', 'console_session', 'customer_user', 'event', 'event_pruned', 'gateway_secret', 'operator', 'revoked_token', 'schema_migration', 'webhook', 'webhook_delivery'])
  const xid = await db.query<{ data_type: string }>(`SELECT data_type FROM information_schema.columns WHERE table_name = 'change_log' AND column_name = 'xid'`)
  t.same(xid.map((r) => r.data_type), ['xid8'], 'change_log records the writing transaction (003)')
  await outboxGone(t, db)
})

t.test("a node that starts while another migrates waits for it past the request path's statement bound", async (t) => {
  const url = await freshPostgresDatabase(t)
  // The request path's bound, shortened: on main a migration's statements had it too, and a
  // second node waiting on the lock longer than that failed with "database unavailable".
  const db = createPostgresDb(url, { statementTimeoutMs: 300 })
  const other = new pg.Client({ connectionString: url })
  await other.connect()
  t.teardown(async () => {
    await other.end()
    await db.close()
  })
  await other.query('SELECT pg_advisory_lock($1)', [0x63686174])
  const migrating = migrate(db)
  await new Promise((resolve) => setTimeout(resolve, 1000))
  await other.query('SELECT pg_advisory_unlock($1)', [0x63686174])
  t.same(await migrating, { applied: files }, 'it waited, then applied every file')
  await t.rejects(db.query('SELECT pg_sleep(1)'), /database unavailable: Query read timeout/, 'while a request still has its bound')
})
