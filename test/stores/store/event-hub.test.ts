/**
 * The event stream's hub (src/stream/hub.ts) over a real store and real sockets, for what
 * the black-box test cannot reach in reasonable time: a client that stops reading is dropped
 * (its socket destroyed, its place given back) instead of being buffered for; pings come at
 * the interval set.
 */
import { createServer, type ServerResponse } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import t from 'tap'
import { createStore } from '../../../src/store/store.js'
import { migrate } from '../../../src/store/migrate.js'
import { createEventHub } from '../../../src/stream/hub.js'
import type { Position } from '../../../src/stream/cursor.js'
import { sharedDb } from '../../support/helpers.js'
import { waitFor } from '../../support/poll.js'

const db = await sharedDb(t)
await migrate(db)
const store = createStore(db)
const companyId = (await db.query<{ id: string }>(`INSERT INTO company (id, name) VALUES (gen_random_uuid(), 'Acme') RETURNING id`))[0]!.id
const secret = Buffer.alloc(32, 7)

async function hubWithServer(options: { maxBufferedBytes?: number; pingMs?: number; stallMs?: number }, resume?: Position) {
  const hub = createEventHub({ store, cursorSecret: async () => secret, logger: { warn: () => {}, info: () => {} }, maxStreams: 10, maxStreamsPerCompany: 10, ...options })
  const responses: ServerResponse[] = []
  const server = createServer((_request, response) => {
    responses.push(response)
    if (hub.reserve(companyId) !== undefined) throw new Error('no place')
    void hub.open({ companyId, types: undefined, resume, response, start: () => response.writeHead(200, { 'content-type': 'text/event-stream' }) })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    hub.close()
    server.closeAllConnections()
    server.close()
  })
  const socket = await new Promise<Socket>((resolve) => {
    const s = connect((server.address() as AddressInfo).port, '127.0.0.1', () => resolve(s))
  })
  t.teardown(() => socket.destroy())
  socket.write('GET /events HTTP/1.1\r\nhost: x\r\n\r\n')
  await waitFor('the stream to join', () => hub.size() === 1 && responses[0]?.headersSent === true)
  return { hub, response: responses[0]!, socket }
}

t.test('a client that stops reading is dropped once its socket holds more than the bound', async (t) => {
  const { hub, response, socket } = await hubWithServer({ maxBufferedBytes: 64 * 1024 })
  socket.pause() // reads nothing from here on
  // Far more than the kernel's socket buffers hold: some of it must wait in the process.
  await db.query(
    `INSERT INTO event (company_id, type, actor, subject, detail) SELECT $1, 'api_key.created', '{"kind":"admin"}', jsonb_build_object('kind', 'apiKey', 'keyId', repeat('k', 900) || n), '{}' FROM generate_series(1, 20000) n`,
    [companyId],
  )
  await hub.onChange()
  t.equal(hub.size(), 0, 'its place is given back')
  t.ok(response.destroyed, 'its response is destroyed, and what waited in it with it')
})

/** Far more than the kernel's socket buffers hold: some of it must wait in the process. */
const manyEvents = (count: number) =>
  db.query(
    `INSERT INTO event (company_id, type, actor, subject, detail) SELECT $1, 'api_key.created', '{"kind":"admin"}', jsonb_build_object('kind', 'apiKey', 'keyId', repeat('k', 900) || n), '{}' FROM generate_series(1, $2::int) n`,
    [companyId, count],
  )

t.test("a stream replaying its backlog holds no change's read; stalled, it is dropped after stallMs", async (t) => {
  const resume = { base: await store.eventSnapshot() }
  await manyEvents(5000)
  const { hub, response, socket } = await hubWithServer({ stallMs: 1500 }, resume)
  socket.pause() // the replay waits for the client to read
  await waitFor('the replay to wait for its client', () => hub.replaying() === 1 && response.writableNeedDrain)
  // A change's read, with this stream among the hub's members: it must not wait for the replay.
  await db.query(`SELECT record_event($1, 'api_key.created', '{"kind":"admin"}', '{"kind":"apiKey","keyId":"live"}', '{}')`, [companyId])
  await hub.onChange()
  t.equal(hub.replaying(), 1, "the change's read finished while the stream still replays")
  await waitFor('the stalled stream to be dropped', () => hub.size() === 0, { timeoutMs: 10_000 })
  t.ok(response.destroyed, 'its response is destroyed')
  t.equal(hub.replaying(), 0)
})

t.test('pings come at the interval', async (t) => {
  const { socket } = await hubWithServer({ pingMs: 50 })
  let received = ''
  socket.on('data', (chunk) => (received += String(chunk)))
  await waitFor('two pings', () => received.split(': ping\n\n').length > 2)
  t.pass()
})
