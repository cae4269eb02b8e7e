import { createPostgresDb } from '../../../src/store/db.js'
import { freshPostgresDatabase, storeIndependentTest } from '../../support/helpers.js'

/**
 * The store's statements are prepared once per connection (named), so that PostgreSQL does
 * not parse and plan them on every call; never more than a bounded number of texts, and
 * none at all with DATABASE_PREPARED_STATEMENTS=false. What a connection holds is read from
 * pg_prepared_statements on that same connection (a pool of one).
 */
const prepared = (db: ReturnType<typeof createPostgresDb>) =>
  db.query<{ name: string; statement: string }>('SELECT name, statement FROM pg_prepared_statements ORDER BY name')

storeIndependentTest('a statement with parameters is prepared once per connection and reused', async (t) => {
  const db = createPostgresDb(await freshPostgresDatabase(t), { max: 1 })
  t.teardown(() => db.close())
  const sql = 'SELECT $1::int + 1 AS n'
  t.same(await db.query(sql, [1]), [{ n: 2 }])
  t.same(await db.query(sql, [41]), [{ n: 42 }], 'the second call answers with its own parameters')
  const statements = await prepared(db)
  t.equal(statements.length, 1, 'one statement for the two calls')
  t.match(statements[0], { name: /^chat_auth_[0-9a-f]{32}$/, statement: sql })
  await db.query('SELECT 1')
  t.equal((await prepared(db)).length, 1, 'a statement without parameters stays unnamed')
})

storeIndependentTest('at most 500 texts are prepared: SQL built anew per call does not fill the connection', async (t) => {
  const db = createPostgresDb(await freshPostgresDatabase(t), { max: 1 })
  t.teardown(() => db.close())
  for (let i = 0; i < 520; i++) t.equal((await db.query<{ n: number }>(`SELECT $1::int + ${i} AS n`, [1]))[0]!.n, i + 1)
  t.equal((await prepared(db)).length, 500)
})

storeIndependentTest('preparedStatements: false prepares nothing', async (t) => {
  const db = createPostgresDb(await freshPostgresDatabase(t), { max: 1, preparedStatements: false })
  t.teardown(() => db.close())
  await db.query('SELECT $1::int AS n', [1])
  await db.query('SELECT $1::int AS n', [2])
  t.equal((await prepared(db)).length, 0)
})
