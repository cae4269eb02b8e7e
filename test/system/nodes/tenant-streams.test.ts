/**
 * SPEC §8.2 and §7.3 ("one company never slows another") for the event stream, through real
 * node processes over PostgreSQL (a fresh database) and a Redis of their own:
 * - a company replaying a large backlog (several streams resumed from an old cursor at once)
 *   delays neither another company's revocations, on either node, nor the events those write
 *   to that company's live stream before they answer; the replaying streams still get every
 *   event once, in order, and what committed during the replay after it;
 * - one company cannot take every stream of a node: past its share, 429 with Retry-After,
 *   while another company still opens its own; the refusals are logged as what they are.
 */
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import t, { type Test } from 'tap'
import { freshPostgresDatabase } from '../../support/databases.js'
import { call, setupCompany } from '../../support/http-client.js'
import { waitFor } from '../../support/poll.js'
import { spawnNode, startGatewayProcess, type GatewayProcess } from '../../support/processes.js'
import { startRedis } from '../../support/services.js'

interface Company {
  companyId: string
  keyId: string
  keySecret: string
}

const STREAM_READERS = fileURLToPath(new URL('../../support/stream-readers-process.mjs', import.meta.url))

/** What test/support/stream-readers-process.mjs says of each stream it reads. */
interface ReaderStream {
  stream: number
  events: number
  backlog: number
  ordered: boolean
  tail: Array<[string, unknown]>
}

interface StreamEvent {
  id: string
  type: string
  data: { id: string; type: string; subject: Record<string, string>; detail: Record<string, unknown> }
  at: number
}

const LEASE_MS = 500

interface Round {
  via: string
  status: number
  ms: number
  /** node-1 acknowledged the change before the answer (always, when it is the writer) */
  acknowledged: boolean
  /** when B's event arrived on its node-1 stream, from the answer (negative: before it) */
  eventAfterMs: number
}

/** The publishes of `node` every other node acknowledged (chat_auth_bus_publishes_total{outcome="acked"}). */
async function acknowledgedPublishes(node: GatewayProcess): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`)).text()
  return Number(/^chat_auth_bus_publishes_total\{outcome="acked"\} (\d+)/m.exec(text)?.[1] ?? 0)
}

const basic = (company: Company) => 'Basic ' + Buffer.from(`${company.keyId}:${company.keySecret}`).toString('base64')

/** An event stream read as fast as it comes, parsed as Server-Sent Events; `events` grows as they arrive. */
async function openStream(t: Test, base: string, company: Company, lastEventId?: string) {
  const controller = new AbortController()
  t.teardown(() => controller.abort())
  const response = await fetch(`${base}/rest/v1/auth/events`, {
    headers: { accept: 'text/event-stream', authorization: basic(company), ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }) },
    signal: controller.signal,
  })
  if (response.status !== 200) throw new Error(`stream: ${response.status} ${await response.text()}`)
  const events: StreamEvent[] = []
  const reading = (async () => {
    const decoder = new TextDecoder()
    let text = ''
    for await (const chunk of response.body!) {
      const blocks = (text + decoder.decode(chunk, { stream: true })).split('\n\n')
      text = blocks.pop()!
      for (const block of blocks) {
        const field = (name: string) => block.split('\n').find((line) => line.startsWith(`${name}: `))?.slice(name.length + 2)
        const data = field('data')
        if (data !== undefined) events.push({ id: field('id') ?? '', type: field('event') ?? '', data: JSON.parse(data), at: performance.now() })
      }
    }
  })().catch(() => {})
  return { events, close: () => controller.abort(), reading }
}

async function nodesOverRedis(t: Test, count: 1 | 2, env: Record<string, string> = {}) {
  const redis = await startRedis()
  t.teardown(() => redis.stop())
  const databaseUrl = await freshPostgresDatabase(t)
  const nodeEnv = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, CACHE_LEASE_MS: String(LEASE_MS), ...env }
  const nodes: GatewayProcess[] = []
  t.teardown(() => Promise.allSettled(nodes.map((node) => node.stop())))
  // One first, so that the migrations run once.
  nodes.push(await startGatewayProcess(nodeEnv, { name: 'node-1' }))
  if (count === 2) nodes.push(await startGatewayProcess(nodeEnv, { name: 'node-2' }))
  return { nodes: nodes as [GatewayProcess, GatewayProcess], databaseUrl }
}

async function userOf(base: string, company: Company, userId: string): Promise<string> {
  const answer = await call(base, 'POST', '/rest/v1/auth/token', { keyId: company.keyId, keySecret: company.keySecret, userId })
  if (answer.status !== 200) throw new Error(`token: ${answer.status} ${JSON.stringify(answer.body)}`)
  return answer.body.user.id
}

const invalidate = (base: string, company: Company, customerUserId: string) =>
  call(base, 'POST', '/rest/v1/auth/invalidate-token', { keyId: company.keyId, keySecret: company.keySecret, customerUserId })

t.test("a company replaying a large backlog delays no other company's revocations, nor their events", async (t) => {
  const { nodes, databaseUrl } = await nodesOverRedis(t, 2)
  const [one, two] = nodes
  const a = await setupCompany(one.url, 'Replaying')
  const b = await setupCompany(one.url, 'Bystander')
  const alice = await userOf(one.url, a, 'alice')
  const bob = await userOf(one.url, b, 'bob')

  // A's cursor: the last event it saw before the backlog.
  const first = await openStream(t, one.url, a)
  t.equal((await invalidate(one.url, a, alice)).status, 200)
  await waitFor("A's first event", () => first.events.length === 1)
  first.close()
  const BACKLOG = 10_000
  const db = new pg.Client({ connectionString: databaseUrl })
  await db.connect()
  t.teardown(() => db.end())
  await db.query(
    `SELECT record_event($1, 'api_key.created', '{"kind":"admin"}', jsonb_build_object('kind', 'apiKey', 'keyId', 'k' || n), '{}') FROM generate_series(1, $2::int) n`,
    [a.companyId, BACKLOG],
  )

  const bStream = await openStream(t, one.url, b)
  // A's four replays are read by a process of their own: their flood never delays what this one sees.
  const readers = spawnNode(STREAM_READERS, { name: 'replays', args: [`${one.url}/rest/v1/auth/events`, basic(a), '4', first.events[0]!.id] })
  t.teardown(() => readers.stop())
  const replays = () => {
    const lines = readers.output().trim().split('\n').reverse()
    const failed = lines.find((line) => line.startsWith('{"error"'))
    if (failed !== undefined) throw new Error(`A's streams: ${failed}`)
    const latest = lines.find((line) => line.startsWith('{"streams"') && line.endsWith('}'))
    return latest === undefined ? [] : (JSON.parse(latest) as { streams: ReaderStream[] }).streams
  }
  // From the first event of the first replay: on a node that replays inside its change queue, the others wait behind it.
  await waitFor("A's replays to begin", () => replays().some((stream) => stream.events > 0), { timeoutMs: 30_000 })
  const replaying = () => replays().length < 4 || replays().some((stream) => stream.backlog < BACKLOG)

  // B revokes on both nodes, turn by turn, for as long as A replays on node-1.
  const rounds: Round[] = []
  let aInvalidated = false
  while (replaying() || rounds.length < 2) {
    const via = rounds.length % 3 === 2 ? one : two
    const ackedBefore = await acknowledgedPublishes(two)
    const started = performance.now()
    const answer = await invalidate(via.url, b, bob).catch((error: Error) => ({ status: 0, body: error.message }))
    const answeredAt = performance.now()
    const version = answer.status === 200 ? answer.body.newTokenVersion : -1
    // node-2's writes wait for node-1's acknowledgement, or, when node-1 is late (a machine that
    // starves it), out its lease: then its event may follow the answer, by a lease at most.
    const acknowledged = via === one || (await acknowledgedPublishes(two)) > ackedBefore
    const event = await waitFor(`B's event ${version} on node-1`, () => bStream.events.find((e) => e.data.detail.newTokenVersion === version), { timeoutMs: 30_000 }).catch(() => undefined)
    rounds.push({ via: via.name, status: answer.status, ms: Math.round(answeredAt - started), acknowledged, eventAfterMs: event === undefined ? Infinity : Math.round(event.at - answeredAt) })
    // A's own change during its replay: its streams get it after the backlog.
    if (!aInvalidated) aInvalidated = (await invalidate(two.url, a, alice)).status === 200
    if (rounds.length >= 30) break
  }
  t.ok(rounds.length >= 2, `${rounds.length} rounds of B's revocations ran while A replayed`)
  t.ok(aInvalidated, "A's own invalidation answered during its replay")
  for (const round of rounds) {
    const what = `B's invalidation via ${round.via} (${round.ms} ms, ${round.acknowledged ? 'acknowledged by node-1' : "node-1's lease waited out"})`
    t.equal(round.status, 200, `${what}: 200`)
    if (round.acknowledged) t.ok(round.eventAfterMs <= 0, `${what}: its event was on B's node-1 stream before the answer (${round.eventAfterMs} ms)`)
    else t.ok(round.eventAfterMs <= LEASE_MS + 1000, `${what}: its event on B's node-1 stream within a lease + 1 s of the answer (${round.eventAfterMs} ms)`)
    // Tens of milliseconds when nothing waits; a revocation queued behind the replay took seconds.
    t.ok(round.ms < 5000, `${what}: answered within 5 s`)
  }
  t.ok(rounds.some((round) => round.via === 'node-2' && round.acknowledged), 'node-1 acknowledged some of node-2\'s writes while A replayed')

  const done = await waitFor("A's replays to end", replays, { timeoutMs: 120_000, until: (streams) => streams.every((stream) => stream.backlog === BACKLOG && stream.tail.length > 0) })
  for (const stream of done) {
    t.ok(stream.ordered, `stream ${stream.stream + 1}: the backlog's ${BACKLOG} events, each once, in commit order`)
    t.strictSame(stream.tail, [['tokens.invalidated', { newTokenVersion: 2 }]], `stream ${stream.stream + 1}: then what A committed during the replay, once`)
  }
})

t.test("past a company's share of a node's streams: 429 with Retry-After; other companies still get theirs", async (t) => {
  const { nodes } = await nodesOverRedis(t, 1, { MAX_EVENT_STREAMS: '6', MAX_EVENT_STREAMS_PER_COMPANY: '4' })
  const [one] = nodes
  const [a, b, c] = [await setupCompany(one.url, 'Greedy'), await setupCompany(one.url, 'Other'), await setupCompany(one.url, 'Third')]
  for (let i = 0; i < 4; i++) await openStream(t, one.url, a)
  const streamCall = (company: Company) => fetch(`${one.url}/rest/v1/auth/events`, { headers: { accept: 'text/event-stream', authorization: basic(company) } })
  for (let i = 0; i < 3; i++) {
    const refused = await streamCall(a)
    t.equal(refused.status, 429, "the company's fifth stream")
    if (refused.status === 200) return void (await refused.body?.cancel())
    t.equal(refused.headers.get('retry-after'), '5')
    t.strictSame(await refused.json(), { statusCode: 429, message: 'Too many open event streams of this company on this node', code: 'TOO_MANY_COMPANY_EVENT_STREAMS' })
  }
  await openStream(t, one.url, b)
  await openStream(t, one.url, b)
  const full = await streamCall(c)
  t.equal(full.status, 503, 'the node is full: six streams open')
  if (full.status === 200) return void (await full.body?.cancel())
  t.strictSame(await full.json(), { statusCode: 503, message: 'Too many open event streams on this node', code: 'TOO_MANY_EVENT_STREAMS' })

  const lines = one
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: number; msg: string })
  t.strictSame(
    lines.filter((line) => line.level >= 50),
    [],
    'no refusal is logged as an error',
  )
  const refusals = lines.filter((line) => /event streams/.test(line.msg))
  t.ok(refusals.every((line) => line.level === 40), 'refusals are logged at warn')
  t.ok(refusals.length <= 2, `at most one line per refusal kind within 5 s (${refusals.length})`)
})
