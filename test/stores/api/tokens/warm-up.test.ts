import t from 'tap'
import type { Db } from '../../../../src/store/db.js'
import { migrate } from '../../../../src/store/migrate.js'
import { createStore } from '../../../../src/store/store.js'
import { sharedDb, startApp } from '../../../support/helpers.js'
import { waitFor } from '../../../support/poll.js'

/**
 * WARM_UP_USERS: a starting node reads the most recently created or changed users (and
 * their agents) into its caches, and /readyz answers 503 until it has.
 */
t.test('a node warms its cache with the most recent users and is not ready until it has', async (t) => {
  const db = await sharedDb(t)
  await migrate(db)
  const store = createStore(db)
  const company = await store.createCompany('Acme')
  const agent = (await store.createAgent(company.id, 'bot', true))!
  const users = []
  for (let i = 0; i < 30; i++) users.push((await store.createUserIfAbsent(company.id, `u${i}`, null))!)
  // user i was last changed i minutes ago: the first 20 are the most recent
  for (const [i, user] of users.entries()) await db.query(`UPDATE customer_user SET updated_at = now() - $2::int * interval '1 minute' WHERE id = $1`, [user.id, i])

  // The warm-up's first read is held until the test lets it go.
  let release = () => {}
  const held = new Promise<void>((resolve) => (release = resolve))
  const gated: Db = {
    ...db,
    query: async (sql, params) => {
      if (sql.includes('ORDER BY updated_at DESC')) await held
      return db.query(sql, params)
    },
  }
  const node = await startApp(t, { WARM_UP_USERS: '20' }, { db: gated })
  const before = await node.inject({ method: 'GET', url: '/readyz' })
  t.equal(before.statusCode, 503, 'not ready while warming up')
  t.equal(before.json().cacheWarm, false)
  release()
  await waitFor('the warm-up to finish', async () => (await node.inject({ method: 'GET', url: '/readyz' })).json(), { until: (body) => body.cacheWarm === true, timeoutMs: 10_000 })
  t.equal((await node.inject({ method: 'GET', url: '/readyz' })).statusCode, 200, 'ready once warm')
  const caches = node.gateway.states.caches
  t.equal(caches.users.size, 20, 'twenty users cached')
  t.ok(users.slice(0, 20).every((u) => caches.users.get(u.id) !== undefined), 'the twenty most recent ones')
  t.ok(caches.agents.get(agent.id), 'and their agent')
})

t.test('without WARM_UP_USERS a node is ready at once and caches nothing ahead', async (t) => {
  const node = await startApp(t)
  const ready = await node.inject({ method: 'GET', url: '/readyz' })
  t.equal(ready.statusCode, 200)
  t.equal(ready.json().cacheWarm, true)
  t.equal(node.gateway.states.caches.users.size, 0)
})
