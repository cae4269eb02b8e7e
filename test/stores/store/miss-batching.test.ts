import t, { type Test } from 'tap'
import { createMemoryBus } from '../../../src/bus/memory-bus.js'
import { createStates } from '../../../src/cache/states.js'
import { openChangePipeline, someSteps } from '../../../src/change-pipeline.js'
import type { Db } from '../../../src/store/db.js'
import { migrate } from '../../../src/store/migrate.js'
import { createStore } from '../../../src/store/store.js'
import { generateApiKey } from '../../../src/auth/api-keys.js'
import { sharedDb } from '../../support/helpers.js'

/**
 * Cache misses are coalesced and batched (src/cache/miss-batcher.ts): misses arriving in
 * one tick are one `= ANY($1)` query per cache, a key asked for many times is read once,
 * and each fill keeps the coherent cache's ticket rules. Counted on the real store.
 */
function counting(db: Db): { db: Db; reads: string[]; gate: { held?: Promise<void> } } {
  const reads: string[] = []
  const gate: { held?: Promise<void> } = {}
  return {
    reads,
    gate,
    db: {
      ...db,
      query: async (sql, params) => {
        if (/^SELECT .* FROM (customer_user|agent|api_key) WHERE/s.test(sql.trim())) {
          reads.push(sql.includes('ANY(') ? 'batch' : 'single')
          await gate.held
        }
        return db.query(sql, params)
      },
    },
  }
}

async function setUp(t: Test) {
  const db = await sharedDb(t)
  await migrate(db)
  const store = createStore(db)
  const company = await store.createCompany('Acme')
  const agents = [(await store.createAgent(company.id, 'one', true))!, (await store.createAgent(company.id, 'two', true))!]
  const users = []
  for (let i = 0; i < 50; i++) users.push((await store.createUserIfAbsent(company.id, `u${i}`, null))!)
  const keys = [generateApiKey(), generateApiKey()]
  for (const key of keys) await store.createApiKey(company.id, key.keyId, key.secretHash, null)
  const counted = counting(db)
  const bus = createMemoryBus()
  const states = createStates(createStore(counted.db), bus, 1000)
  openChangePipeline(bus, someSteps({ caches: states }))
  return { store, company, agents, users, keys, states, reads: counted.reads, gate: counted.gate, bus }
}

t.test('misses of one tick are one query per cache; a key asked for many times is read once', async (t) => {
  const s = await setUp(t)
  const asked = [...s.users.map((u) => u.id), ...s.users.map((u) => u.id)]
  const [users, agents, keys, unknown, malformed] = await Promise.all([
    Promise.all(asked.map((id) => s.states.user(id))),
    Promise.all(s.agents.map((a) => s.states.agent(a.id))),
    Promise.all(s.keys.map((k) => s.states.apiKey(k.keyId))),
    s.states.user('00000000-0000-4000-8000-000000000000'),
    s.states.user('not-a-uuid'),
  ])
  t.same(s.reads, ['batch', 'batch', 'batch'], '100 user, 2 agent and 2 key misses: three queries')
  // a cached user has no id (it is the key asked for): its external id tells which one it is
  const externalIdOf = new Map(s.users.map((u) => [u.id, u.externalId]))
  t.same(users.map((u) => u?.externalId), asked.map((id) => externalIdOf.get(id)), 'each caller gets its own user')
  t.same(agents.map((a) => a?.id), s.agents.map((a) => a.id))
  t.same(keys.map((k) => k?.keyId), s.keys.map((k) => k.keyId))
  t.equal(unknown, undefined, 'an unknown user is not found')
  t.equal(malformed, undefined, 'a malformed id is not found, and does not fail the batch')
  t.equal(s.states.caches.users.size, 50, 'every user found is cached')
  s.reads.length = 0
  t.equal((s.states.user(s.users[3]!.id) as { externalId: string }).externalId, s.users[3]!.externalId, 'a hit is a plain value')
  t.same(s.reads, [], 'and reads nothing')
})

t.test('a change applied while the batch reads discards that fill only; a later miss reads again', async (t) => {
  const s = await setUp(t)
  const [a, b] = s.users
  const pending = Promise.all([s.states.user(a!.id), s.states.user(b!.id)])
  // The batch goes out on the next tick; the change lands while it is in flight.
  await new Promise((resolve) => setImmediate(resolve))
  const changed = (await s.store.incrementTokenVersion(s.company.id, a!.id))!
  await s.bus.publish({ kind: 'user', state: changed })
  await pending
  t.equal(s.states.caches.users.get(b!.id)?.externalId, b!.externalId, 'the unchanged user was cached')
  const cachedA = s.states.caches.users.get(a!.id)
  t.ok(cachedA === undefined || cachedA.tokenVersion === changed.tokenVersion, 'the raced user was not cached with its old state')
  t.ok(s.states.caches.users.discardedFills + (cachedA === undefined ? 0 : 1) >= 1, 'the raced fill was refused')

  // A miss after a query went out waits for the next query: never a read that started before it.
  s.reads.length = 0
  let release = () => {}
  s.gate.held = new Promise<void>((resolve) => (release = resolve))
  const first = s.states.user(s.users[10]!.id)
  await new Promise((resolve) => setImmediate(resolve))
  t.same(s.reads, ['batch'], 'the first query is out (and held)')
  const second = s.states.user(s.users[10]!.id)
  await new Promise((resolve) => setImmediate(resolve))
  release()
  await Promise.all([first, second])
  t.same(s.reads, ['batch', 'batch'], 'the second miss did not join the read already in flight')
})

t.test('every cached user answers its own row, however many users share the rest of their state', async (t) => {
  const s = await setUp(t)
  const [one, two] = s.agents
  // users alike but for one field each: the token version, the active flag, the agent, the revision
  const changed = [
    await s.store.incrementTokenVersion(s.company.id, s.users[0]!.id), // token version 1, revision 1
    await s.store.setUserActive(s.users[1]!.id, false), // inactive, revision 1
    await s.store.setUserAgent(s.users[2]!.id, two!.id), // another agent, revision 1
    await s.store.setUserAgent(s.users[3]!.id, one!.id), // revision 1 only
    await s.store.incrementTokenVersion(s.company.id, s.users[4]!.id),
  ]
  await s.store.incrementTokenVersion(s.company.id, s.users[4]!.id) // token version 2, revision 2
  const expected = async () => new Map((await s.store.getUsers(s.users.map((u) => u.id))).map((u) => [u.id, u]))
  const fieldsOf = (u: { companyId: string; externalId: string; agentId: string; tokenVersion: number; active: boolean; revision: number } | undefined) =>
    u && { companyId: u.companyId, externalId: u.externalId, agentId: u.agentId, tokenVersion: u.tokenVersion, active: u.active, revision: u.revision }
  let rows = await expected()
  for (const user of s.users) t.same(fieldsOf(await s.states.user(user.id)), fieldsOf(rows.get(user.id)), `read: ${user.externalId}`)
  t.ok(changed.every((c) => c !== undefined))

  // a state a change message carries is cached the same way
  const later = (await s.store.incrementTokenVersion(s.company.id, s.users[5]!.id))!
  await s.bus.publish({ kind: 'user', state: later })
  rows = await expected()
  t.same(fieldsOf(s.states.caches.users.get(later.id)), fieldsOf(rows.get(later.id)), 'applied from a change message')
  t.same(fieldsOf(s.states.caches.users.get(s.users[6]!.id)), fieldsOf(rows.get(s.users[6]!.id)), 'and its old profile still serves the others')
})
