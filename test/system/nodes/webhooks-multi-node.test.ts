import t from 'tap'
import { freshPostgresDatabase } from '../../support/databases.js'
import { admin, call, setupCompany } from '../../support/http-client.js'
import { startGatewayProcess, type GatewayProcess } from '../../support/processes.js'
import { startRedis, type RedisServer } from '../../support/services.js'
import { waitFor } from '../../support/poll.js'
import { startWebhookReceiver, type WebhookReceiver } from '../../support/webhook-receiver.js'

/**
 * SPEC §9.3, "with many nodes, one node delivers each attempt": two node processes over one
 * Redis and one PostgreSQL, both woken by every write (their own through the bus, the
 * other's through Redis), both reading the queue. Three endpoints each refuse the first
 * attempt of every event (500) and take the second: each event must arrive exactly twice
 * at each endpoint — a third request would be an attempt made by both nodes.
 */
let redis: RedisServer
const nodes: GatewayProcess[] = []
t.teardown(async () => {
  await Promise.allSettled(nodes.map((n) => n.stop()))
  await redis?.stop()
})

t.test('two nodes on one PostgreSQL: each attempt made by one node only', async (t) => {
  const databaseUrl = await freshPostgresDatabase(t)
  redis = await startRedis()
  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, WEBHOOK_RETRY_BASE_MS: '20', WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8' }
  nodes.push(await startGatewayProcess(env, { name: 'node-a' }))
  nodes.push(await startGatewayProcess(env, { name: 'node-b' }))
  const [a, b] = nodes as [GatewayProcess, GatewayProcess]

  const tenant = await setupCompany(a.url)
  const receivers: WebhookReceiver[] = []
  for (let i = 0; i < 3; i++) {
    const receiver = await startWebhookReceiver()
    t.teardown(() => receiver.close())
    const seen = new Set<string>()
    receiver.behave = (request) => (seen.has(request.event.id) ? 200 : (seen.add(request.event.id), 500))
    const hook = await admin(b.url, 'POST', `/admin/v1/companies/${tenant.companyId}/webhooks`, { url: receiver.url, types: ['tokens.invalidated'] })
    t.equal(hook.status, 201)
    receiver.secret = hook.body.secret
    receivers.push(receiver)
  }

  const issued = (await call(a.url, 'POST', '/rest/v1/auth/token', { keyId: tenant.keyId, keySecret: tenant.keySecret, userId: 'many' })).body
  const invalidate = (node: GatewayProcess) => call(node.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, customerUserId: issued.user.id })
  const writes = 30
  const answers = await Promise.all(Array.from({ length: writes }, (_, i) => invalidate(i % 2 === 0 ? a : b)))
  t.ok(answers.every((answer) => answer.status === 200), 'every write answered 200, half on each node')

  for (const [i, receiver] of receivers.entries()) {
    await waitFor(`endpoint ${i}: every event twice`, () => receiver.countsByEvent().size === writes && [...receiver.countsByEvent().values()].every((n) => n >= 2), { timeoutMs: 30_000 })
  }
  // Late duplicates would come within a poll (1 s) or a retry of the last ones.
  await new Promise((resolve) => setTimeout(resolve, 1500))
  for (const [i, receiver] of receivers.entries()) {
    const counts = [...receiver.countsByEvent().values()]
    t.equal(counts.length, writes, `endpoint ${i}: every event`)
    t.strictSame(counts.filter((n) => n !== 2), [], `endpoint ${i}: each event exactly twice (one refused attempt, one taken): no attempt made by both nodes`)
    t.ok(receiver.received.every((r) => r.verified), `endpoint ${i}: all signed`)
  }
})
