/**
 * `npm run test:chaos`, the noisy neighbour (SPEC §7.3 "one company never slows another",
 * §8.2, §9.3). Three chaos nodes (lib/node-host.mjs: `chat-auth serve`'s node, noting what
 * each event stream was written) over a Redis and a PostgreSQL database of their own.
 *
 * Company A misbehaves on every node at once: it resumes streams from a cursor 100,000
 * events back and reads them slowly (so that every node replays for the whole run), holds
 * its whole share of each node's streams (MAX_EVENT_STREAMS_PER_COMPANY), has 40 webhook
 * endpoints that take the connection and never answer, and keeps writing events for them.
 * Meanwhile company B invalidates its users through each node in turn. A violation is:
 * - an invalidation of B not answered 200 within ANSWER_WITHIN_MS;
 * - B's event not yet written to B's stream on some node when asked right after the 200
 *   (no fault is near: every node must have acknowledged);
 * - B's token from before the invalidation accepted by some node after the 200;
 * - B's webhook delivery of that event not received within 10 s of the 200.
 *
 * Then once with the mutant `acks-wait-for-replays` (lib/mutants.mjs: a node's acknowledgement
 * waits until no stream replays, as before issue 40): the checker must find violations.
 */
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import t, { type Test } from 'tap'
import { createScratchDatabase } from '../support/databases.js'
import { admin, call, setupCompany, verify } from '../support/http-client.js'
import { waitFor } from '../support/poll.js'
import { spawnNode, type ChildHandle, type GatewayProcess } from '../support/processes.js'
import { startRedis } from '../support/services.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'
import { mutantCalls, startChaosNode, type Mutant } from './lib/nodes.js'

const NODES = 3
const BACKLOG = 100_000
/** MAX_EVENT_STREAMS_PER_COMPANY: A holds all of it on every node, half of it replaying */
const SHARE = 4
const HANGING_ENDPOINTS = 40
const B_USERS = 10
const DRIVE_MS = 20_000
/**
 * B's answers must not wait for A's replays, which outlast the run: a node whose
 * acknowledgement waits for them never answers in time (the request gives up after 10 s).
 * A busy machine's node answered a first round in 3.7 s: the bound leaves that a margin.
 */
const ANSWER_WITHIN_MS = 8000
const DELIVERED_WITHIN_MS = 10_000
const LEASE_MS = 500
/** how long A's replaying readers wait after each chunk: slower than any node writes */
const SLOW_READER_PAUSE_MS = 200
const STREAM_READERS = fileURLToPath(new URL('../support/stream-readers-process.mjs', import.meta.url))

interface Company {
  companyId: string
  keyId: string
  keySecret: string
}

interface Violations {
  slowAnswer: string[]
  streamNotWritten: string[]
  revokedAccepted: string[]
  webhookLate: string[]
}

const basic = (company: Company) => 'Basic ' + Buffer.from(`${company.keyId}:${company.keySecret}`).toString('base64')

/** What test/support/stream-readers-process.mjs last said of its streams. */
function readerStreams(readers: ChildHandle): Array<{ events: number; backlog: number }> {
  const lines = readers.output().trim().split('\n').reverse()
  const latest = lines.find((line) => line.startsWith('{"streams"') && line.endsWith('}'))
  return latest === undefined ? [] : JSON.parse(latest).streams
}

/** A stream held open by this process, its bytes read and dropped (the node notes what it wrote). */
async function holdStream(t: Test, base: string, company: Company): Promise<void> {
  const controller = new AbortController()
  t.teardown(() => controller.abort())
  const response = await fetch(`${base}/rest/v1/auth/events`, { headers: { accept: 'text/event-stream', authorization: basic(company) }, signal: controller.signal })
  if (response.status !== 200) throw new Error(`stream: ${response.status} ${await response.text()}`)
  void (async () => {
    for await (const _ of response.body!);
  })().catch(() => {})
}

/** The cursor of the first event a new stream of `company` receives (made by invalidating `userId`). */
async function firstCursor(base: string, company: Company, userId: string): Promise<string> {
  const controller = new AbortController()
  const response = await fetch(`${base}/rest/v1/auth/events`, { headers: { accept: 'text/event-stream', authorization: basic(company) }, signal: controller.signal })
  await invalidate(base, company, userId)
  let text = ''
  let id: string | undefined
  const reader = response.body!.getReader()
  while (id === undefined) {
    const { done, value } = await reader.read()
    if (done) throw new Error('the stream ended before its first event')
    text += Buffer.from(value).toString()
    id = /^id: (.+)$/m.exec(text)?.[1]
  }
  await reader.cancel()
  controller.abort()
  return id
}

const invalidate = (base: string, company: Company, customerUserId: string) =>
  call(base, 'POST', '/rest/v1/auth/invalidate-token', { keyId: company.keyId, keySecret: company.keySecret, customerUserId })

async function token(base: string, company: Company, userId: string): Promise<{ token: string; user: { id: string } }> {
  const answer = await call(base, 'POST', '/rest/v1/auth/token', { keyId: company.keyId, keySecret: company.keySecret, userId })
  if (answer.status !== 200) throw new Error(`token: ${answer.status} ${JSON.stringify(answer.body)}`)
  return answer.body
}

async function scenario(t: Test, mutant: Mutant | undefined): Promise<{ violations: Violations; rounds: number; nodes: GatewayProcess[] }> {
  const database = await createScratchDatabase(undefined, 'chaos_noisy')
  t.teardown(() => database.drop())
  const redis = await startRedis()
  t.teardown(() => redis.stop())
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const env = { DATABASE_URL: database.url, REDIS_URL: redis.url, CACHE_LEASE_MS: String(LEASE_MS), MAX_EVENT_STREAMS_PER_COMPANY: String(SHARE), WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8' }
  const nodes: GatewayProcess[] = []
  t.teardown(() => Promise.allSettled(nodes.map((node) => node.stop())))
  // One first, so that the migrations run once.
  nodes.push(await startChaosNode('node-0', env, { mutant }))
  for (let i = 1; i < NODES; i++) nodes.push(await startChaosNode(`node-${i}`, env, { mutant }))
  const [first] = nodes as [GatewayProcess]

  const a = await setupCompany(first.url, 'Noisy')
  const b = await setupCompany(first.url, 'Quiet')
  const aUser = (await token(first.url, a, 'a-user')).user.id
  const bUsers = await Promise.all(Array.from({ length: B_USERS }, async (_, i) => ({ externalId: `b-${i}`, id: (await token(first.url, b, `b-${i}`)).user.id })))

  // A's backlog: its cursor, then 100,000 events after it, written straight into the store.
  const cursor = await firstCursor(first.url, a, aUser)
  const db = new pg.Client({ connectionString: database.url })
  await db.connect()
  t.teardown(() => db.end())
  await db.query(
    `SELECT record_event($1, 'api_key.created', '{"kind":"admin"}', jsonb_build_object('kind', 'apiKey', 'keyId', 'k' || n), '{}') FROM generate_series(1, $2::int) n`,
    [a.companyId, BACKLOG],
  )

  // A's webhooks hang; B's one answers at once, and the driver notes when each event arrived.
  const arrived = new Map<string, number>()
  receiver.behave = (entry) => {
    if (entry.event.companyId === a.companyId) return 'hang'
    arrived.set(`${String(entry.event.subject.id)}:${String(entry.event.detail.newTokenVersion)}`, performance.now())
    return 200
  }
  for (let i = 0; i < HANGING_ENDPOINTS; i++) {
    const created = await admin(first.url, 'POST', `/admin/v1/companies/${a.companyId}/webhooks`, { url: `${receiver.url}/a/${i}` })
    if (created.status !== 201) throw new Error(`webhook: ${created.status} ${JSON.stringify(created.body)}`)
  }
  const bHook = await admin(first.url, 'POST', `/admin/v1/companies/${b.companyId}/webhooks`, { url: `${receiver.url}/b`, types: ['tokens.invalidated'] })
  receiver.secret = bHook.body.secret

  // A takes its whole share of every node's streams, half of it replaying the backlog slowly.
  const replaying: ChildHandle[] = []
  for (const node of nodes) {
    const url = `${node.url}/rest/v1/auth/events`
    const slow = spawnNode(STREAM_READERS, { name: `${node.name}-replays`, args: [url, basic(a), String(SHARE / 2), cursor, String(SLOW_READER_PAUSE_MS)] })
    const live = spawnNode(STREAM_READERS, { name: `${node.name}-live`, args: [url, basic(a), String(SHARE / 2), '', '0'] })
    t.teardown(() => Promise.all([slow.stop(), live.stop()]))
    replaying.push(slow)
    await waitFor(`A's streams on ${node.name}`, () => readerStreams(slow).filter((s) => s.events > 0).length + readerStreams(live).length, { until: (n) => n === SHARE, timeoutMs: 30_000 })
    const refused = await fetch(url, { headers: { accept: 'text/event-stream', authorization: basic(a) } })
    await refused.body?.cancel()
    t.equal(refused.status, 429, `A holds its share of ${node.name}'s streams: its next one is refused`)
    await holdStream(t, node.url, b)
  }

  const violations: Violations = { slowAnswer: [], streamNotWritten: [], revokedAccepted: [], webhookLate: [] }
  const expected: Array<{ key: string; answeredAt: number }> = []
  const end = performance.now() + DRIVE_MS
  let rounds = 0
  while (performance.now() < end) {
    const node = nodes[rounds % NODES]!
    const user = bUsers[rounds % B_USERS]!
    rounds++
    // A keeps writing: each of its events queues a delivery to each of its hanging endpoints.
    void invalidate(nodes[rounds % NODES]!.url, a, aUser).catch(() => {})
    const held = await token(node.url, b, user.externalId)
    const started = performance.now()
    const answer = await invalidate(node.url, b, user.id).catch((error: Error) => ({ status: 0, body: error.message }))
    const answeredAt = performance.now()
    const what = `round ${rounds} via ${node.name}`
    if (answer.status !== 200 || answeredAt - started > ANSWER_WITHIN_MS) violations.slowAnswer.push(`${what}: ${answer.status} in ${Math.round(answeredAt - started)} ms`)
    if (answer.status !== 200) continue
    const version: number = answer.body.newTokenVersion
    const key = `tokens.invalidated:${user.id}:${version}`
    const written = await Promise.all(nodes.map((n) => call(n.url, 'POST', '/chaos/stream/written', { keys: [key] })))
    for (const [i, asked] of written.entries()) if (asked.body?.written?.[0] !== true) violations.streamNotWritten.push(`${what}: not on node-${i}'s stream`)
    const checks = await Promise.all(nodes.map((n) => verify(n.url, held.token)))
    for (const [i, check] of checks.entries()) if (check.status === 200) violations.revokedAccepted.push(`${what}: node-${i} accepted the token of version ${version - 1}`)
    expected.push({ key: `${user.id}:${version}`, answeredAt })
  }
  const stillReplaying = replaying.every((readers) => readerStreams(readers).every((stream) => stream.backlog < BACKLOG))
  t.ok(stillReplaying, 'every node still replayed A\'s backlog when the rounds ended')

  const lastAnswer = Math.max(0, ...expected.map((e) => e.answeredAt))
  await waitFor('B\'s deliveries', () => expected.every((e) => arrived.has(e.key)) || performance.now() > lastAnswer + DELIVERED_WITHIN_MS, { timeoutMs: DELIVERED_WITHIN_MS + 5000 })
  for (const { key, answeredAt } of expected) {
    const at = arrived.get(key)
    if (at === undefined || at - answeredAt > DELIVERED_WITHIN_MS) violations.webhookLate.push(`${key}: ${at === undefined ? 'never delivered' : `delivered ${Math.round(at - answeredAt)} ms after the 200`}`)
  }
  return { violations, rounds, nodes }
}

const total = (v: Violations) => v.slowAnswer.length + v.streamNotWritten.length + v.revokedAccepted.length + v.webhookLate.length

function report(t: Test, rounds: number, v: Violations): void {
  t.comment(`${rounds} rounds: ${v.slowAnswer.length} slow or failed answers, ${v.streamNotWritten.length} events not on a stream at the 200, ${v.revokedAccepted.length} revoked tokens accepted, ${v.webhookLate.length} late deliveries`)
  for (const line of [...v.slowAnswer, ...v.streamNotWritten, ...v.revokedAccepted, ...v.webhookLate].slice(0, 10)) t.comment(line)
}

t.test('a noisy company (replays, every stream of its share, hanging webhooks) slows no other company', async (t) => {
  const { violations, rounds } = await scenario(t, undefined)
  report(t, rounds, violations)
  // Each round is a token, an invalidation and six checks one after another: a busy machine runs fewer.
  t.ok(rounds >= 5, `B's rounds ran (${rounds})`)
  t.equal(total(violations), 0, 'no violation')
})

t.test('the checker bites: with nodes whose acknowledgement waits for the replays, violations appear', async (t) => {
  const { violations, rounds, nodes } = await scenario(t, 'acks-wait-for-replays')
  report(t, rounds, violations)
  t.ok((await mutantCalls(nodes, (line) => t.comment(line))) > 0, 'the mutant (test/chaos/lib/mutants.mjs acks-wait-for-replays) reached the nodes')
  t.ok(violations.slowAnswer.length + violations.streamNotWritten.length > 0, `slow answers or events not on a stream at the 200 (${violations.slowAnswer.length + violations.streamNotWritten.length})`)
})
