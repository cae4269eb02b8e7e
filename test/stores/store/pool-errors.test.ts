import t from 'tap'
import pg from 'pg'
import { createTenant, freshPostgresDatabase, startApp } from '../../support/helpers.js'
import { waitFor } from '../../support/poll.js'

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
    // the pool's connections only: the node's claim on the database holds an advisory lock on
    // a connection of its own, whose loss rightly stops writes until the claim is taken back
    `SELECT pg_terminate_backend(a.pid) AS killed FROM pg_stat_activity a
      WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.state = 'idle'
        AND NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.locktype = 'advisory')`,
  )
  t.ok(rows.length > 0, `terminated ${rows.length} idle connection(s) of the node`)
  await waitFor('the pool to report the loss', async () => (await poolErrors()) > 0, { timeoutMs: 10_000 })
  t.ok(node.logs.some((line) => line.includes('an idle PostgreSQL connection was lost')), 'logged')
  // Each terminated connection is reported when its error event comes: one not yet reported
  // may still serve one query (a 503), never more than one per connection terminated.
  const statuses: number[] = []
  await waitFor('the node to answer', async () => statuses[statuses.push((await node.admin('POST', '/admin/v1/companies', { name: 'After' })).statusCode) - 1], { until: (status) => status === 201, timeoutMs: 5000, everyMs: 50 })
  t.ok(statuses.length <= rows.length, `and the node still answers (${statuses.join(', ')})`)
})
