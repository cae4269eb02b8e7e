import t from 'tap'
import pg from 'pg'
import { createTenant, freshPostgresDatabase, startApp } from './support/helpers.js'
import { waitFor } from './support/poll.js'

/**
 * An idle PostgreSQL connection that the server drops is not silently swallowed: the
 * node counts it (chat_auth_store_pool_errors_total), logs it, and keeps answering.
 */
t.test('a lost idle PostgreSQL connection is counted and logged, and the node carries on', async (t) => {
  const databaseUrl = await freshPostgresDatabase(t)
  const node = await startApp(t, { DATABASE_URL: databaseUrl })
  await createTenant(node)
  const poolErrors = async () => Number(/^chat_auth_store_pool_errors_total (\d+)$/m.exec((await node.inject({ method: 'GET', url: '/metrics' })).body)?.[1] ?? 0)
  t.equal(await poolErrors(), 0)

  const killer = new pg.Client({ connectionString: databaseUrl })
  await killer.connect()
  t.teardown(() => killer.end())
  const { rows } = await killer.query(
    `SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'`,
  )
  t.ok(rows.length > 0, `terminated ${rows.length} idle connection(s) of the node`)
  await waitFor('the pool to report the loss', async () => (await poolErrors()) > 0, { timeoutMs: 10_000 })
  t.ok(node.logs.some((line) => line.includes('an idle PostgreSQL connection was lost')), 'logged')
  t.equal((await node.admin('POST', '/admin/v1/companies', { name: 'After' })).statusCode, 201, 'and the node still answers')
})
