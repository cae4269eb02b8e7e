/**
 * SPEC §10.2 across nodes (src/assembly/nodes.ts over src/bus/publishing/board.ts): two
 * in-process nodes over PostgreSQL and a Redis of their own. Each node's listing holds both
 * nodes, each with what it said of itself; the open sessions of a company or an agent are
 * counted across the nodes (the other node answers the question); a change's receipt names
 * both nodes and the sessions each ended. On the embedded store: the one node.
 */
import t from 'tap'
import { createTenant, freshPostgresDatabase, startApp, storeIndependentTest, type TestApp } from '../../support/helpers.js'
import { startRedis } from '../../support/services.js'
import { waitFor } from '../../support/poll.js'

async function tokenOf(node: TestApp, tenant: { keyId: string; keySecret: string }, userId: string): Promise<{ token: string; user: { id: string } }> {
  const answer = await node.inject({ method: 'POST', url: '/rest/v1/auth/token', payload: { keyId: tenant.keyId, keySecret: tenant.keySecret, userId } })
  return answer.json()
}

storeIndependentTest('two nodes over Redis: each lists both, counts sessions across them, and names both in a receipt', async (t) => {
  const redis = await startRedis()
  t.teardown(() => redis.stop())
  const env = { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL: redis.url, CACHE_LEASE_MS: '500' }
  const [a, b] = [await startApp(t, env), await startApp(t, env)]
  await waitFor('both nodes to trust their caches', () => a.gateway.bus.trusted() && b.gateway.bus.trusted())
  const ids = [a.gateway.bus.nodeId, b.gateway.bus.nodeId].sort()

  // Until the board shows both trusted: on a busy machine a 500 ms lease can lapse for a moment
  // between two heartbeats, and the board then says so, as it should.
  const listed = await waitFor('each node to list both, ready and trusted, with their statuses', () => a.gateway.nodes.list(), {
    until: (nodes) => nodes.length === 2 && nodes.every((node) => node.version !== null && node.changeLogReadAt !== null && node.ready && node.trusted),
  })
  t.same(listed.map((node) => node.nodeId).sort(), ids)
  for (const node of listed) {
    t.equal(node.ready, true, `${node.nodeId} ready`)
    t.equal(node.trusted, true)
    t.equal(node.untrustedSince, null)
    t.ok(node.redis?.subscribed && typeof node.redis.follows === 'string', 'follows a Redis server, subscribed')
    t.ok(node.changeLogReadAt !== null && node.behind.ms < 60_000, `read the change log ${node.behind.ms} ms ago`)
  }

  const acme = await createTenant(a, 'Acme')
  const other = await createTenant(a, 'Other')
  const alice = await tokenOf(a, acme, 'alice')
  const bob = await tokenOf(a, acme, 'bob')
  const carol = await tokenOf(a, other, 'carol')
  // Sessions on b only (two of Acme's, one of Other's); a asks.
  for (const issued of [alice, bob, carol]) t.ok((await b.gateway.sessions.open(issued.token)).ok)
  t.same(await a.gateway.nodes.openSessions({ scope: 'company', key: acme.companyId }), { total: 2, nodes: 2, answered: 2 })
  t.same(await a.gateway.nodes.openSessions({ scope: 'agent', key: other.agentId }), { total: 1, nodes: 2, answered: 2 })
  t.same(await b.gateway.nodes.openSessions({ scope: 'company', key: other.companyId }), { total: 1, nodes: 2, answered: 2 }, 'its own sessions counted too')
  t.equal((await waitFor("b's status to show its sessions", () => a.gateway.nodes.list(), { until: (nodes) => nodes.find((n) => n.nodeId === b.gateway.bus.nodeId)?.sessions === 3 })).length, 2)

  // A change written on a ends alice's session on b: the receipt says so.
  const committed = await a.gateway.changes.invalidateTokens(acme.companyId, alice.user.id)
  t.equal(committed?.receipt.outcome, 'acknowledged')
  t.same(
    committed?.receipt.nodes.map((node) => [node.nodeId, node.sessionsEnded]).sort(),
    [
      [a.gateway.bus.nodeId, 0],
      [b.gateway.bus.nodeId, 1],
    ].sort(),
  )
  t.ok(committed?.receipt.nodes.every((node) => typeof node.ackedAfterMs === 'number'), 'both acknowledged')
  const afterA = await waitFor('a to note the change it applied', () => a.gateway.nodes.list(), { until: (nodes) => nodes.every((node) => node.lastChangeAt !== null) })
  t.equal(afterA.length, 2)

  // b closes: a lists itself alone once b's registration is gone, and b no longer answers.
  await b.app.close()
  t.same((await a.gateway.nodes.list()).map((node) => node.nodeId), [a.gateway.bus.nodeId])
  t.same(await a.gateway.nodes.openSessions({ scope: 'company', key: acme.companyId }), { total: 0, nodes: 1, answered: 1 })
})

t.test('the embedded store: the one node, and its own sessions', async (t) => {
  const node = await startApp(t, { DATA_DIR: 'memory://' })
  const nodes = await node.gateway.nodes.list()
  t.equal(nodes.length, 1)
  t.match(nodes[0], { nodeId: node.gateway.bus.nodeId, ready: true, trusted: true, redis: null, behind: { changes: 0, ms: 0 }, sessions: 0 })
  const acme = await createTenant(node)
  const issued = await tokenOf(node, acme, 'alice')
  t.ok((await node.gateway.sessions.open(issued.token)).ok)
  t.same(await node.gateway.nodes.openSessions({ scope: 'company', key: acme.companyId }), { total: 1, nodes: 1, answered: 1 })
  const committed = await node.gateway.changes.invalidateTokens(acme.companyId, issued.user.id)
  t.match(committed?.receipt, { outcome: 'embedded', nodes: [{ nodeId: node.gateway.bus.nodeId, sessionsEnded: 1 }] })
})
