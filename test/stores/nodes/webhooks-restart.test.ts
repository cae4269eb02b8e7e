import t from 'tap'
import { freshPostgresDatabase, STORE, type Teardown } from '../../support/helpers.js'
import { admin, call, setupCompany } from '../../support/http-client.js'
import { migratedDataDir } from '../../support/pglite-data-dir.js'
import { startGatewayProcess } from '../../support/processes.js'
import { waitFor } from '../../support/poll.js'
import { startWebhookReceiver } from '../../support/webhook-receiver.js'

/**
 * SPEC §9.3, "delivery survives restarts": a node process killed with kill -9 while an
 * attempt is in flight and five more events are queued; restarted on the same store (the
 * pass's: a PGlite folder or a PostgreSQL database). Every event reaches the receiver; the
 * one in flight may arrive twice (the receiver took it, the node died before it heard the
 * answer), and the test says how many duplicates there were.
 */
async function durableStore(t: Teardown): Promise<Record<string, string>> {
  if (STORE === 'postgres') return { DATABASE_URL: await freshPostgresDatabase(t) }
  return { DATA_DIR: await migratedDataDir(t) }
}

t.test('kill -9 with a delivery in flight, then a restart: nothing lost', async (t) => {
  const env = { ...(await durableStore(t)), WEBHOOK_RETRY_BASE_MS: '50', WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8' }
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  receiver.behave = (request) => (request.n === 1 ? 'hang' : 200)

  const node = await startGatewayProcess(env, { teardown: t.teardown.bind(t) })
  const tenant = await setupCompany(node.url)
  const hook = await admin(node.url, 'POST', `/admin/v1/companies/${tenant.companyId}/webhooks`, { url: receiver.url, types: ['tokens.invalidated'] })
  t.equal(hook.status, 201)
  receiver.secret = hook.body.secret
  const issued = (await call(node.url, 'POST', '/rest/v1/auth/token', { keyId: tenant.keyId, keySecret: tenant.keySecret, userId: 'crash-me' })).body
  const invalidate = () => call(node.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, customerUserId: issued.user.id })

  t.equal((await invalidate()).status, 200)
  await waitFor('the first attempt, held by the receiver', () => receiver.received.length >= 1)
  // Queued behind the held one: the endpoint's deliveries go one at a time.
  for (let i = 0; i < 5; i++) t.equal((await invalidate()).status, 200)
  const events = (await admin(node.url, 'GET', `/admin/v1/companies/${tenant.companyId}/events`)).body.events as Array<{ id: string; type: string }>
  const expected = events.filter((e) => e.type === 'tokens.invalidated').map((e) => e.id).sort()
  t.equal(expected.length, 6)
  await node.kill9()

  const restarted = await startGatewayProcess(env, { teardown: t.teardown.bind(t) })
  // The dead node's lease on the endpoint lapses (twice the 5 s attempt timeout), then the restarted one sends.
  await waitFor('every event at the receiver', () => expected.every((id) => receiver.countsByEvent().has(id)), { timeoutMs: 40_000 })
  const counts = receiver.countsByEvent()
  const duplicates = [...counts.values()].reduce((sum, n) => sum + n - 1, 0)
  t.comment(`${STORE}: ${receiver.received.length} requests for ${counts.size} events, ${duplicates} duplicate(s)`)
  t.strictSame([...counts.keys()].sort(), expected, 'each event arrived, none other')
  t.ok(duplicates <= 1, 'at most the attempt in flight at the kill is repeated')
  t.ok(receiver.received.every((r) => r.verified), 'every request signed')
  const later = receiver.received.slice(1).map((r) => r.event.id)
  t.strictSame(later.slice(-5), expected.slice(1), 'after the restart, in event order')
  const listed = await waitFor('the deliveries recorded', async () => (await admin(restarted.url, 'GET', `/admin/v1/webhooks/${hook.body.id}/deliveries`)).body as Array<{ status: string }>, {
    until: (list) => list.length === 6 && list.every((d) => d.status === 'delivered'),
  })
  t.equal(listed.length, 6)
  await restarted.stop()
})
