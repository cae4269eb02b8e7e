import { randomUUID } from 'node:crypto'
import t from 'tap'
import { createPostgresDb } from '../../../src/store/db.js'
import { migrate } from '../../../src/store/migrate.js'
import { createStore } from '../../../src/store/store.js'
import { generateWebhookSecret } from '../../../src/webhooks/signature.js'
import { freshPostgresDatabase } from '../../support/databases.js'
import { admin, call, setupCompany } from '../../support/http-client.js'
import { startGatewayProcess, type GatewayProcess } from '../../support/processes.js'
import { startRedis, type RedisServer } from '../../support/services.js'
import { sleep, waitFor } from '../../support/poll.js'
import { startWebhookReceiver } from '../../support/webhook-receiver.js'

/**
 * SPEC §9.3 and §7.3, "one company never slows another": two node processes over one Redis
 * and one PostgreSQL (32 sending slots each). Company A has 64 endpoints that take the
 * connection and never answer, each with six events queued: on a sender without shares, A
 * filled every slot of both nodes, each for 5 s per attempt and six attempts in a row, and
 * company B's one delivery waited about 30 s (52–57 s in the issue's run). Here A holds at most its share of each node's slots and B's event arrives
 * at once; the bound below (10 s, SPEC: "a few seconds") leaves a busy 2-core machine a wide
 * margin over the tens of milliseconds it takes, and is under a third of one A endpoint's
 * six 5 s timeouts.
 */
const SLOTS_PER_COMPANY = 4
const A_ENDPOINTS = 64
const A_EVENTS = 6
const B_WITHIN_MS = 10_000

let redis: RedisServer
const nodes: GatewayProcess[] = []
t.teardown(async () => {
  await Promise.allSettled(nodes.map((n) => n.stop()))
  await redis?.stop()
})

t.test("64 hanging endpoints of one company do not hold up another company's delivery", async (t) => {
  const databaseUrl = await freshPostgresDatabase(t)
  redis = await startRedis()
  const hanging = await startWebhookReceiver()
  t.teardown(() => hanging.close())
  hanging.behave = () => 'hang'

  // Company A, its endpoints and its six events are written before the nodes start, so that
  // each endpoint has all six due when it is first taken (as a backlog would be).
  const seed = createPostgresDb(databaseUrl, { max: 1 })
  try {
    await migrate(seed)
    const store = createStore(seed)
    const companyA = await store.createCompany('A')
    for (let i = 0; i < A_ENDPOINTS; i++) {
      await store.createWebhook({ id: randomUUID(), companyId: companyA.id, url: `${hanging.url}/${i}`, types: ['tokens.invalidated'], secret: generateWebhookSecret() })
    }
    await store.createAgent(companyA.id, 'bot', true)
    const userA = (await store.createUserIfAbsent(companyA.id, 'a-user', null))!
    for (let i = 0; i < A_EVENTS; i++) await store.incrementTokenVersion(companyA.id, userA.id)
  } finally {
    await seed.close()
  }

  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8', WEBHOOK_SLOTS_PER_COMPANY: String(SLOTS_PER_COMPANY) }
  nodes.push(await startGatewayProcess(env, { name: 'node-a' }))
  nodes.push(await startGatewayProcess(env, { name: 'node-b' }))
  const [a, b] = nodes as [GatewayProcess, GatewayProcess]
  await waitFor("A's first attempts, held by its receiver", () => hanging.open() >= SLOTS_PER_COMPANY)

  // Sampled while B's event is on its way: how many of A's attempts the nodes hold at once.
  let mostOpen = 0
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      mostOpen = Math.max(mostOpen, hanging.open())
      await sleep(20)
    }
  })()

  const fast = await startWebhookReceiver()
  t.teardown(() => fast.close())
  const companyB = await setupCompany(b.url, 'B')
  const hookB = await admin(b.url, 'POST', `/admin/v1/companies/${companyB.companyId}/webhooks`, { url: fast.url, types: ['tokens.invalidated'] })
  t.equal(hookB.status, 201)
  fast.secret = hookB.body.secret
  const userB = (await call(b.url, 'POST', '/rest/v1/auth/token', { keyId: companyB.keyId, keySecret: companyB.keySecret, userId: 'b-user' })).body.user.id
  const written = performance.now()
  t.equal((await call(a.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: companyB.keyId, keySecret: companyB.keySecret, customerUserId: userB })).status, 200)
  let tookMs = Infinity
  try {
    await waitFor("B's event at its receiver", () => fast.received.length >= 1, { timeoutMs: B_WITHIN_MS, everyMs: 10 })
    tookMs = performance.now() - written
  } catch {
    // asserted below, with what was seen
  }
  // A's attempts keep going meanwhile: a second of them after B's delivery shows the share held.
  await sleep(1000)
  sampling = false
  await sampler

  t.comment(`B's event arrived ${Number.isFinite(tookMs) ? `${Math.round(tookMs)} ms` : `not within ${B_WITHIN_MS} ms`} after its write; A's receiver held at most ${mostOpen} attempts at once, ${hanging.received.length} in all`)
  t.ok(tookMs < B_WITHIN_MS, `B's delivery arrived within ${B_WITHIN_MS / 1000} s of its write while A's 64 endpoints hang (took ${Number.isFinite(tookMs) ? `${Math.round(tookMs)} ms` : 'longer'})`)
  t.ok(fast.received[0]?.verified, "B's event signed")
  t.ok(mostOpen <= nodes.length * SLOTS_PER_COMPANY, `A held at most its share of the slots: ${SLOTS_PER_COMPANY} on each of ${nodes.length} nodes (held ${mostOpen} at once)`)
})
