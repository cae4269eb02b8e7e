import { randomUUID } from 'node:crypto'
import t from 'tap'
import { createStore } from '../../../src/store/store.js'
import { storeWithUser } from '../../support/helpers.js'
import { sleep } from '../../support/poll.js'

/**
 * The webhook queue (migrations/010_webhooks.sql, src/store/webhooks.ts): a delivery is
 * enqueued by the event's own transaction, for each endpoint whose types take it; an
 * endpoint is leased by one claimer at a time, until its lease lapses or is given back; a
 * sender that lost its lease learns it when it records its attempt.
 */
t.test('enqueued with the event, in its transaction: a rollback leaves none; types filter', async (t) => {
  const { db, store, company, user } = await storeWithUser(t)
  const all = (await store.createWebhook({ id: randomUUID(), companyId: company.id, url: 'http://127.0.0.1:9/', types: null, secret: 'whsec_x' }))!
  const some = (await store.createWebhook({ id: randomUUID(), companyId: company.id, url: 'http://127.0.0.1:9/', types: ['user.deactivated'], secret: 'whsec_y' }))!
  t.equal(await store.createWebhook({ id: randomUUID(), companyId: randomUUID(), url: 'http://x/', types: null, secret: 'whsec_z' }), undefined, 'no such company')

  await db.withSession(async (session) => {
    await session.query('BEGIN')
    const inTransaction = createStore({ kind: db.kind, query: session.query, withSession: () => Promise.reject(new Error('not here')), close: async () => {} })
    t.ok(await inTransaction.incrementTokenVersion(company.id, user.id), 'an event written inside a transaction…')
    await session.query('ROLLBACK')
  })
  t.strictSame(await store.listDeliveries(all.id, 10), [], '…and rolled back: nothing queued')

  await store.incrementTokenVersion(company.id, user.id)
  await store.setUserActive(user.id, false)
  t.strictSame((await store.listDeliveries(all.id, 10)).map((d) => d.eventType), ['user.deactivated', 'tokens.invalidated'], 'every type, newest first')
  t.strictSame((await store.listDeliveries(some.id, 10)).map((d) => d.eventType), ['user.deactivated'], 'its types only')
  const [queued] = await store.listDeliveries(some.id, 10)
  t.match(queued, { attempts: 0, lastAttemptAt: null, lastStatus: null, lastError: null, deliveredAt: null })
  t.type(queued!.nextAttemptAt, Date, 'due')
  const [due] = await store.dueDeliveries(some.id, 10)
  const payload = JSON.parse(due!.payload)
  t.match(payload, { id: queued!.eventId, type: 'user.deactivated', companyId: company.id, actor: { kind: 'admin' }, subject: { kind: 'user', id: user.id } })
  t.match(payload.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'at as toISOString writes it')

  const deleted = await store.deleteWebhook(some.id)
  t.equal(deleted?.id, some.id)
  t.equal((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_delivery WHERE webhook_id = $1`, [some.id]))[0]!.n, 0, 'its queue went with it')
})

t.test('leases: one claimer per endpoint until it lapses or is given back; a lost lease is reported', async (t) => {
  const { db, store, company, user } = await storeWithUser(t, 'bob')
  const hook = (await store.createWebhook({ id: randomUUID(), companyId: company.id, url: 'http://127.0.0.1:9/', types: null, secret: 'whsec_x' }))!
  const mine = (endpoints: Array<{ id: string }>) => endpoints.filter((e) => e.id === hook.id)
  t.strictSame(mine(await store.claimEndpoints('a', 60_000, 100, 100)), [], 'nothing due, nothing claimed')
  await store.incrementTokenVersion(company.id, user.id)

  const [claimed] = mine(await store.claimEndpoints('a', 300, 100, 100))
  t.strictSame(claimed, { id: hook.id, url: 'http://127.0.0.1:9/', secret: 'whsec_x', unanswered: 0 })
  t.strictSame(mine(await store.claimEndpoints('b', 300, 100, 100)), [], 'leased: another claimer skips it')
  await sleep(400)
  t.equal(mine(await store.claimEndpoints('b', 60_000, 100, 100)).length, 1, 'lapsed: another claimer takes it')
  const [due] = await store.dueDeliveries(hook.id, 10)
  const failed = { delivered: false, status: 500, error: 'answered 500', retryInMs: 60_000, retryForMs: 86_400_000, pauseEndpointMs: null }
  t.equal(await store.recordAttempt('a', hook.id, due!.id, failed, 10_000), false, 'the first claimer learns it lost the lease')
  t.equal(await store.recordAttempt('b', hook.id, due!.id, failed, 10_000), true, 'the holder renews it')
  const [after] = await store.listDeliveries(hook.id, 10)
  t.match(after, { attempts: 2, lastStatus: 500, lastError: 'answered 500', deliveredAt: null })
  t.ok(after!.nextAttemptAt!.getTime() > Date.now() + 30_000, 'due again after retryInMs')
  t.strictSame(await store.dueDeliveries(hook.id, 10), [], 'not due meanwhile')

  await store.releaseEndpoint('a', hook.id)
  await db.query(`UPDATE webhook_delivery SET next_attempt_at = now() WHERE webhook_id = $1`, [hook.id])
  t.strictSame(mine(await store.claimEndpoints('c', 60_000, 100, 100)), [], "giving back a lease one does not hold changes nothing")
  await store.releaseEndpoint('b', hook.id)
  t.equal(mine(await store.claimEndpoints('c', 60_000, 100, 100)).length, 1, 'given back: taken at once')
  const delivered = { delivered: true, status: 200, error: null, retryInMs: 60_000, retryForMs: 86_400_000, pauseEndpointMs: null }
  t.equal(await store.recordAttempt('c', hook.id, due!.id, delivered, 10_000), true)
  t.match((await store.listDeliveries(hook.id, 10))[0], { attempts: 3, lastStatus: 200, lastError: null, nextAttemptAt: null })
  t.type((await store.listDeliveries(hook.id, 10))[0]!.deliveredAt, Date)
})

/**
 * SPEC §7.3 and §9.3, one company never slows another: a claimer takes at most `perCompany`
 * endpoints of one company at a time (those it already holds count), and takes them company
 * by company, so that one company's many due endpoints cannot fill a claim. Before, the
 * claim took endpoints by id: ten of A's, whose ids sort first, before B's one.
 */
t.test("claims: each company at most its share of a claimer's leases, companies taken in turn", async (t) => {
  const { store, company: a, user: userA } = await storeWithUser(t)
  const b = await store.createCompany('B')
  await store.createAgent(b.id, 'bot', true)
  const userB = (await store.createUserIfAbsent(b.id, 'bob', null))!
  const aIds = Array.from({ length: 10 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`)
  const bId = 'ffffffff-ffff-4fff-bfff-ffffffffffff'
  for (const id of aIds) await store.createWebhook({ id, companyId: a.id, url: 'http://127.0.0.1:9/', types: null, secret: 'whsec_a' })
  await store.createWebhook({ id: bId, companyId: b.id, url: 'http://127.0.0.1:9/', types: null, secret: 'whsec_b' })
  await store.incrementTokenVersion(a.id, userA.id)
  await store.incrementTokenVersion(b.id, userB.id)
  const ofA = (endpoints: Array<{ id: string }>) => endpoints.filter((e) => aIds.includes(e.id)).length

  const first = await store.claimEndpoints('n1', 60_000, 3, 2)
  t.equal(first.length, 3)
  t.ok(first.some((e) => e.id === bId), "B's endpoint is in a claim of three, though A's ten sort first")
  t.equal(ofA(first), 2, "and two of A's: its share")
  t.strictSame(await store.claimEndpoints('n1', 60_000, 10, 2), [], 'n1 holds A’s share already, and B has nothing else due')
  const second = await store.claimEndpoints('n2', 60_000, 10, 2)
  t.equal(ofA(second), 2, "another claimer (node) has a share of its own")
  await store.releaseEndpoint('n1', first.find((e) => aIds.includes(e.id))!.id)
  t.equal(ofA(await store.claimEndpoints('n1', 60_000, 10, 2)), 1, 'one given back: one more of A')
})

/**
 * An endpoint that does not answer (a timeout, a refused connection) is paused as a whole:
 * its other due deliveries wait with it, instead of each being tried at once, holding a
 * sending slot for 5 s apiece. An answer, whatever its status, ends the pause.
 */
t.test('an endpoint that does not answer is paused, with its other deliveries; an answer resumes it', async (t) => {
  const { db, store, company, user } = await storeWithUser(t)
  const hook = (await store.createWebhook({ id: randomUUID(), companyId: company.id, url: 'http://127.0.0.1:9/', types: null, secret: 'whsec_x' }))!
  await store.incrementTokenVersion(company.id, user.id)
  await store.incrementTokenVersion(company.id, user.id)
  const [claimed] = await store.claimEndpoints('a', 60_000, 10, 4)
  t.equal(claimed?.unanswered, 0, 'nothing unanswered yet')
  const [first] = await store.dueDeliveries(hook.id, 10)
  const timedOut = { delivered: false, status: null, error: 'no answer within 5 s', retryInMs: 60_000, retryForMs: 86_400_000, pauseEndpointMs: 60_000 }
  t.equal(await store.recordAttempt('a', hook.id, first!.id, timedOut, 10_000), true)
  await store.releaseEndpoint('a', hook.id)
  t.equal((await store.dueDeliveries(hook.id, 10)).length, 1, 'its second delivery is still due…')
  t.strictSame(await store.claimEndpoints('b', 60_000, 10, 4), [], '…but the endpoint is paused: nobody claims it')

  await db.query(`UPDATE webhook SET paused_until = now() WHERE id = $1`, [hook.id])
  const [again] = await store.claimEndpoints('b', 60_000, 10, 4)
  t.equal(again?.unanswered, 1, 'the pause over, it is claimed, one attempt unanswered')
  const [second] = await store.dueDeliveries(hook.id, 10)
  const answered500 = { delivered: false, status: 500, error: 'answered 500', retryInMs: 60_000, retryForMs: 86_400_000, pauseEndpointMs: null }
  t.equal(await store.recordAttempt('b', hook.id, second!.id, answered500, 10_000), true)
  await store.releaseEndpoint('b', hook.id)
  await store.incrementTokenVersion(company.id, user.id)
  const [answered] = await store.claimEndpoints('c', 60_000, 10, 4)
  t.equal(answered?.unanswered, 0, 'an answer (even a 500) resets the count and leaves the endpoint unpaused')
})
