/**
 * SPEC §8.2, black box through a listening server and a real SSE client (the `eventsource`
 * package): `GET /rest/v1/auth/events` with the company's API key as HTTP Basic. Refusals
 * get the SPEC bodies; events arrive live, oldest first; a cursor resumes with exactly the
 * events missed, even when two transactions commit out of id order; a cursor that is not
 * this company's, or older than the retention, gets `event: reset`; on two nodes over Redis
 * the event of an invalidation reaches a stream on the other node before the call answers.
 */
import { performance } from 'node:perf_hooks'
import type { AddressInfo } from 'node:net'
import pg from 'pg'
import t, { type Test } from 'tap'
import { EventSource } from 'eventsource'
import { createTenant, errorBody, freshPostgresDatabase, startApp, storeIndependentTest, type Tenant, type TestApp } from '../support/helpers.js'
import { startRedis } from '../support/services.js'
import { sleep, waitFor } from '../support/poll.js'

const TYPES = ['tokens.invalidated', 'token.revoked', 'company.tokens_revoked', 'agent.tokens_revoked', 'user.activated', 'user.deactivated', 'agent.activated', 'agent.deactivated', 'api_key.created', 'api_key.revoked', 'reset']

interface Received {
  type: string
  id: string
  data: Record<string, unknown>
  at: number
}

async function listen(node: TestApp): Promise<string> {
  await node.app.listen({ port: 0, host: '127.0.0.1' })
  return `http://127.0.0.1:${(node.app.server.address() as AddressInfo).port}`
}

const basic = (tenant: Pick<Tenant, 'keyId' | 'keySecret'>) => 'Basic ' + Buffer.from(`${tenant.keyId}:${tenant.keySecret}`).toString('base64')

/** An open stream: what it received so far, in order. */
async function openStream(t: Test, base: string, tenant: Tenant, options: { query?: string; lastEventId?: string } = {}) {
  const received: Received[] = []
  const source = new EventSource(`${base}/rest/v1/auth/events${options.query ?? ''}`, {
    fetch: (input, init) =>
      fetch(input, { ...init, headers: { ...init?.headers, authorization: basic(tenant), ...(options.lastEventId === undefined ? {} : { 'last-event-id': options.lastEventId }) } }),
  })
  t.teardown(() => source.close())
  for (const type of TYPES) source.addEventListener(type, (event) => received.push({ type, id: event.lastEventId, data: JSON.parse(event.data), at: performance.now() }))
  await new Promise<void>((resolve, reject) => {
    source.onopen = () => resolve()
    source.onerror = (error) => reject(new Error(`stream did not open: ${error.code} ${error.message}`))
  })
  return {
    received,
    close: () => source.close(),
    /** waits until `n` events arrived */
    until: (n: number) => waitFor(`${n} events`, () => received.length >= n, { timeoutMs: 10_000 }),
  }
}

const streamCall = (base: string, headers: Record<string, string>, query = '') => fetch(`${base}/rest/v1/auth/events${query}`, { headers: { accept: 'text/event-stream', ...headers } })

async function invalidateVia(base: string, tenant: Tenant, customerUserId: string) {
  const answer = await fetch(`${base}/rest/v1/auth/invalidate-token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keyId: tenant.keyId, keySecret: tenant.keySecret, customerUserId }) })
  if (answer.status !== 200) throw new Error(`invalidate: ${answer.status} ${await answer.text()}`)
  return answer.json() as Promise<{ newTokenVersion: number }>
}

async function userOf(base: string, tenant: Tenant, userId: string): Promise<string> {
  const answer = await fetch(`${base}/rest/v1/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keyId: tenant.keyId, keySecret: tenant.keySecret, userId }) })
  return ((await answer.json()) as { user: { id: string } }).user.id
}

const node = await startApp(t)
const base = await listen(node)

t.test('bad credentials: 401 with the SPEC body, however they are wrong', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const invalid = errorBody(401, 'Invalid API credentials', 'INVALID_API_CREDENTIALS')
  for (const headers of [{} as Record<string, string>, { authorization: basic({ keyId: acme.keyId, keySecret: 'wrong' }) }, { authorization: basic({ keyId: 'no-such-key', keySecret: acme.keySecret }) }, { authorization: 'Basic !!!' }, { authorization: `Bearer ${acme.keySecret}` }]) {
    const answer = await streamCall(base, headers)
    t.equal(answer.status, 401)
    t.strictSame(await answer.json(), invalid)
  }
})

t.test('failed credentials count towards AUTH_FAILURE_LIMIT: past it, 429 even with the right key', async (t) => {
  const limited = await startApp(t, { AUTH_FAILURE_LIMIT: '2' })
  const limitedBase = await listen(limited)
  const acme = await createTenant(limited, 'Acme')
  for (let attempt = 0; attempt < 2; attempt++) t.equal((await streamCall(limitedBase, { authorization: basic({ keyId: acme.keyId, keySecret: 'wrong' }) })).status, 401)
  const blocked = await streamCall(limitedBase, { authorization: basic(acme) })
  t.equal(blocked.status, 429)
  t.ok(Number(blocked.headers.get('retry-after')) > 0)
  t.strictSame(await blocked.json(), errorBody(429, 'Too many failed attempts', 'RATE_LIMITED'))
})

t.test('failures with one key count against that key only: another key, from another address, still streams', async (t) => {
  const limited = await startApp(t, { AUTH_FAILURE_LIMIT: '2', TRUST_PROXY: '127.0.0.1' })
  const limitedBase = await listen(limited)
  const acme = await createTenant(limited, 'Acme')
  const other = await createTenant(limited, 'Other')
  for (let attempt = 0; attempt < 2; attempt++) {
    const failed = await streamCall(limitedBase, { authorization: basic({ keyId: acme.keyId, keySecret: 'wrong' }), 'x-forwarded-for': `10.7.0.${attempt + 1}` })
    t.equal(failed.status, 401)
  }
  const blocked = await streamCall(limitedBase, { authorization: basic(acme), 'x-forwarded-for': '10.7.0.9' })
  t.equal(blocked.status, 429, 'the guessed-at key is limited, from any address')
  await blocked.body?.cancel()
  const controller = new AbortController()
  const unrelated = await fetch(`${limitedBase}/rest/v1/auth/events`, { headers: { accept: 'text/event-stream', authorization: basic(other), 'x-forwarded-for': '10.7.0.10' }, signal: controller.signal })
  t.equal(unrelated.status, 200, 'another key from another address is not')
  controller.abort()
})

t.test('an unknown type in types= is a 400 VALIDATION_ERROR', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const answer = await streamCall(base, { authorization: basic(acme) }, '?types=tokens.invalidated,nope')
  t.equal(answer.status, 400)
  t.strictSame(await answer.json(), errorBody(400, 'types: unknown event type "nope"', 'VALIDATION_ERROR'))
})

t.test('the API description has the stream: its parameters and a text/event-stream answer', async (t) => {
  const operation = (await node.inject({ method: 'GET', url: '/openapi.json' })).json().paths['/rest/v1/auth/events'].get
  t.strictSame(operation.parameters.map((p: { in: string; name: string }) => `${p.in}:${p.name}`).sort(), ['query:after', 'query:types'])
  t.strictSame(Object.keys(operation.responses['200'].content), ['text/event-stream'])
  t.strictSame(Object.keys(operation.responses).sort(), ['200', '400', '401', '429', '503'])
  t.strictSame(operation.security, [{ apiKeyBasic: [] }], 'the API key as HTTP Basic')
})

t.test('past MAX_EVENT_STREAMS: 503 with Retry-After; a place comes back when a stream closes', async (t) => {
  const small = await startApp(t, { MAX_EVENT_STREAMS: '2' })
  const smallBase = await listen(small)
  const acme = await createTenant(small, 'Acme')
  const streams = [await openStream(t, smallBase, acme), await openStream(t, smallBase, acme)]
  const refused = await streamCall(smallBase, { authorization: basic(acme) })
  t.equal(refused.status, 503)
  t.equal(refused.headers.get('retry-after'), '5')
  t.strictSame(await refused.json(), errorBody(503, 'Too many open event streams on this node', 'TOO_MANY_EVENT_STREAMS'))
  for (const stream of streams) stream.close()
  await waitFor('the places to come back', async () => {
    const answer = await streamCall(smallBase, { authorization: basic(acme) })
    await answer.body?.cancel()
    return answer.status === 200
  })
})

t.test('live: each event arrives as the listing gives it; a company sees only its own; types= filters', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const other = await createTenant(node, 'Other')
  const all = await openStream(t, base, acme)
  const onlyDeactivations = await openStream(t, base, acme, { query: '?types=user.deactivated' })
  const others = await openStream(t, base, other)
  const alice = await userOf(base, acme, 'alice')
  await invalidateVia(base, acme, alice)
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${alice}`, { active: false })).statusCode, 200)
  await all.until(2)
  await onlyDeactivations.until(1)
  const listed = (await node.admin('GET', `/admin/v1/companies/${acme.companyId}/events?limit=2`)).json().events.reverse()
  t.strictSame(
    all.received.map((event) => [event.type, event.data]),
    listed.map((event: { type: string }) => [event.type, event]),
  )
  t.strictSame(
    onlyDeactivations.received.map((event) => event.type),
    ['user.deactivated'],
  )
  const afterFirst = await node.admin('GET', `/admin/v1/companies/${acme.companyId}/events?after=${encodeURIComponent(all.received[0]!.id)}`)
  t.strictSame(afterFirst.json().events, [listed[1]], "the listing's after takes the stream's ids")
  await sleep(300)
  t.strictSame(others.received, [], 'another company sees none of them')
})

t.test('Last-Event-ID resumes with exactly the events missed; a made-up or foreign cursor gets reset', async (t) => {
  const acme = await createTenant(node, 'Acme')
  const other = await createTenant(node, 'Other')
  const alice = await userOf(base, acme, 'alice')
  const first = await openStream(t, base, acme)
  await invalidateVia(base, acme, alice)
  await invalidateVia(base, acme, alice)
  await first.until(2)
  first.close()
  await invalidateVia(base, acme, alice)
  await invalidateVia(base, acme, alice)
  const resumed = await openStream(t, base, acme, { lastEventId: first.received[1]!.id })
  await resumed.until(2)
  await sleep(300)
  t.strictSame(
    resumed.received.map((event) => event.data.detail),
    [{ newTokenVersion: 3 }, { newTokenVersion: 4 }],
    'the two missed, once, oldest first',
  )
  const fromTheMiddle = await openStream(t, base, acme, { query: `?after=${encodeURIComponent(first.received[0]!.id)}` })
  await fromTheMiddle.until(3)
  await sleep(300)
  t.strictSame(
    fromTheMiddle.received.map((event) => event.data.detail),
    [{ newTokenVersion: 2 }, { newTokenVersion: 3 }, { newTokenVersion: 4 }],
    '?after= does the same',
  )

  for (const cursor of ['made-up', first.received[1]!.id.slice(0, -2) + 'AA']) {
    const reset = await openStream(t, base, acme, { lastEventId: cursor })
    await reset.until(1)
    t.strictSame(reset.received.map((event) => [event.type, event.data]), [['reset', {}]])
  }
  const foreign = await openStream(t, base, other, { lastEventId: first.received[1]!.id })
  await foreign.until(1)
  t.strictSame(foreign.received.map((event) => [event.type, event.data]), [['reset', {}]], "another company's cursor: reset")
  await invalidateVia(base, acme, alice)
  await sleep(300)
  t.strictSame(foreign.received.length, 1, 'and it still sees none of the other company')
})

t.test('a cursor far behind: the backlog comes a page at a time (500 events), every event once, oldest first', async (t) => {
  const acme = await createTenant(node, 'Far behind')
  const alice = await userOf(base, acme, 'alice')
  const first = await openStream(t, base, acme)
  await invalidateVia(base, acme, alice)
  await first.until(1)
  first.close()
  const missed = 1203
  for (let i = 0; i < missed; i++) await invalidateVia(base, acme, alice)
  const reads: Array<number | undefined> = []
  const store = node.gateway.store
  const eventsSince = store.eventsSince
  store.eventsSince = (...args) => (reads.push(args[4]), eventsSince(...args))
  t.teardown(() => void (store.eventsSince = eventsSince))
  const resumed = await openStream(t, base, acme, { lastEventId: first.received[0]!.id })
  await waitFor(`${missed} events`, () => resumed.received.length >= missed, { timeoutMs: 30_000 })
  await sleep(300)
  t.strictSame(
    resumed.received.map((event) => (event.data.detail as { newTokenVersion: number }).newTokenVersion),
    Array.from({ length: missed }, (_, i) => i + 2),
    'versions 2…1204, each once, in order',
  )
  t.ok(reads.filter((limit) => limit !== undefined).length >= 3, `the backlog was read in pages (${reads.filter((limit) => limit !== undefined).length} limited reads)`)
  t.ok(reads.every((limit) => limit === undefined || limit <= 500), 'none of more than 500 events')
  t.ok(reads.filter((limit) => limit === undefined).length <= 3, 'only the live reads are unlimited (what committed since the previous one)')
})

t.test('a cursor older than the retention gets reset, then the stream goes on from now', async (t) => {
  const old = await startApp(t)
  const oldBase = await listen(old)
  const acme = await createTenant(old, 'Acme')
  const alice = await userOf(oldBase, acme, 'alice')
  const first = await openStream(t, oldBase, acme)
  await invalidateVia(oldBase, acme, alice)
  await first.until(1)
  first.close()
  await invalidateVia(oldBase, acme, alice)
  t.ok((await old.gateway.store.pruneEvents(0)) > 0, 'the events are pruned')
  const resumed = await openStream(t, oldBase, acme, { lastEventId: first.received[0]!.id })
  await resumed.until(1)
  await invalidateVia(oldBase, acme, alice)
  await resumed.until(2)
  t.strictSame(
    resumed.received.map((event) => [event.type, event.type === 'reset' ? event.data : event.data.detail]),
    [
      ['reset', {}],
      ['tokens.invalidated', { newTokenVersion: 3 }],
    ],
  )
})

t.test('the node ends its streams when it closes', async (t) => {
  const closing = await startApp(t)
  const closingBase = await listen(closing)
  const acme = await createTenant(closing, 'Acme')
  const answer = await streamCall(closingBase, { authorization: basic(acme) })
  t.equal(answer.status, 200)
  t.match(answer.headers.get('content-type'), /^text\/event-stream/)
  const started = performance.now()
  await closing.app.close()
  const rest = await answer.text()
  t.equal(rest, ': open\n\n')
  t.ok(performance.now() - started < 5000, 'closed at once')
})

storeIndependentTest('two transactions committed out of id order: each delivered once, live and on resume', async (t) => {
  const url = await freshPostgresDatabase(t)
  const pgNode = await startApp(t, { DATABASE_URL: url })
  const pgBase = await listen(pgNode)
  const acme = await createTenant(pgNode, 'Acme')
  const alice = await userOf(pgBase, acme, 'alice')
  const stream = await openStream(t, pgBase, acme)
  const held = new pg.Client({ connectionString: url })
  await held.connect()
  t.teardown(() => held.end())
  // The held transaction takes the smaller id, the invalidation the larger, and commits first.
  const list = async (query: string) => {
    const answer = await pgNode.admin('GET', `/admin/v1/companies/${acme.companyId}/events${query}`)
    t.equal(answer.statusCode, 200)
    return answer.json() as { events: Array<{ id: string; type: string }>; next: string | null; cursor: string }
  }
  await held.query('BEGIN')
  await held.query(`SELECT record_event($1, 'api_key.created', '{"kind":"admin"}', '{"kind":"apiKey","keyId":"held"}', '{}')`, [acme.companyId])
  await invalidateVia(pgBase, acme, alice)
  await stream.until(1)
  // A listing read while the smaller id is still uncommitted: the tailer's old trap.
  const whileHeld = await list('?limit=1')
  t.strictSame(whileHeld.events.map((event) => event.type), ['tokens.invalidated'])
  await held.query('COMMIT')
  const secondPage = await list(`?limit=1&before=${whileHeld.next}`)
  t.strictSame(secondPage.events.map((event) => event.type), ['api_key.created'], 'the next page is read at the first page\'s snapshot')
  t.equal(secondPage.events[0]!.id, '1', 'the key created with the tenant, not the one committed since')
  const since = await list(`?after=${encodeURIComponent(whileHeld.cursor)}`)
  t.strictSame(
    since.events.map((event) => [event.type, Number(event.id) < Number(whileHeld.events[0]!.id)]),
    [['api_key.created', true]],
    'after the listing\'s cursor: the event committed since, though its id is smaller',
  )
  t.strictSame((await list(`?after=${encodeURIComponent(since.cursor)}`)).events, [], 'and then nothing')
  t.strictSame((await list('')).events.map((event) => event.type), ['tokens.invalidated', 'api_key.created', 'api_key.created'], 'from the top: all of them, newest id first')
  await stream.until(2)
  await sleep(1500)
  t.strictSame(
    stream.received.map((event) => event.type),
    ['tokens.invalidated', 'api_key.created'],
    'live: both, once, in commit order',
  )
  t.ok(Number(stream.received[1]!.data.id) < Number(stream.received[0]!.data.id), 'the second has the smaller id')
  stream.close()
  const resumed = await openStream(t, pgBase, acme, { lastEventId: stream.received[0]!.id })
  await resumed.until(1)
  const caughtUp = await openStream(t, pgBase, acme, { lastEventId: stream.received[1]!.id })
  await sleep(1500)
  t.strictSame(
    resumed.received.map((event) => event.type),
    ['api_key.created'],
    'resumed after the first: the one committed later, though its id is smaller',
  )
  t.strictSame(caughtUp.received, [], 'resumed after the second: nothing')
})

storeIndependentTest('two nodes over Redis: the event of an invalidation on one reaches a stream on the other before the call answers', async (t) => {
  const redis = await startRedis()
  t.teardown(() => redis.stop())
  const env = { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL: redis.url, CACHE_LEASE_MS: '500' }
  const a = await startApp(t, env)
  const b = await startApp(t, env)
  const [baseA, baseB] = [await listen(a), await listen(b)]
  await waitFor('both nodes to trust their caches', () => a.gateway.bus.trusted() && b.gateway.bus.trusted())
  const acme = await createTenant(a, 'Acme')
  const alice = await userOf(baseA, acme, 'alice')
  const stream = await openStream(t, baseB, acme)
  for (let round = 1; round <= 5; round++) {
    await invalidateVia(baseA, acme, alice)
    const answeredAt = performance.now()
    await stream.until(round).catch((error: unknown) => {
      throw new Error(`${String(error)}; node b logged: ${b.logs.filter((line) => line.includes('"level":40') || line.includes('"level":50')).join('')}`)
    })
    const event = stream.received[round - 1]!
    t.strictSame(event.data.detail, { newTokenVersion: round })
    t.ok(event.at < answeredAt, `round ${round}: the event arrived ${(answeredAt - event.at).toFixed(1)} ms before the answer`)
  }
})
