import { randomBytes } from 'node:crypto'
import t from 'tap'
import { Redis } from 'ioredis'
import { createTenant, freshPostgresDatabase, invalidate, issueToken, startApp, verify, type TestApp } from '../../support/helpers.js'
import { sleep, waitFor } from '../../support/poll.js'

/**
 * An attacker with access to the deployment's Redis (but not its keys) publishes on the
 * invalidation channel: forged changes, genuine changes tampered with, and genuine ones
 * replayed. Three nodes in this process on the real PostgreSQL and the real Redis
 * (127.0.0.1:6379, a prefix of this run's own). A revoked token stays refused on every
 * node, and a later real invalidation still takes effect everywhere.
 */
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = `chat-auth-forgery-${randomBytes(4).toString('hex')}`
const channel = `${prefix}:changes`

const until = (what: string, predicate: () => boolean, timeoutMs = 5000) => waitFor(what, predicate, { timeoutMs, everyMs: 5 })

const rejectedCount = async (node: TestApp): Promise<number> => {
  const text = (await node.inject({ method: 'GET', url: '/metrics' })).body
  let total = 0
  for (const match of text.matchAll(/^chat_auth_bus_rejected_messages_total\{[^}]*\} (\d+)$/gm)) total += Number(match[1])
  return total
}

t.test('forged, tampered and replayed messages never bring a revoked token back', async (t) => {
  const databaseUrl = await freshPostgresDatabase(t)
  const env = { DATABASE_URL: databaseUrl, REDIS_URL, REDIS_PREFIX: prefix, CACHE_LEASE_MS: '300' }
  const first = await startApp(t, env)
  const nodes = [first, ...(await Promise.all([startApp(t, env), startApp(t, env)]))]
  const [a, b, c] = nodes as [TestApp, TestApp, TestApp]

  const attacker = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
  const listener = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
  t.teardown(async () => {
    listener.disconnect()
    const keys = await attacker.keys(`${prefix}:*`).catch(() => [])
    if (keys.length) await attacker.del(...keys).catch(() => {})
    attacker.disconnect()
  })
  const seen: string[] = []
  listener.on('message', (_channel: string, payload: string) => seen.push(payload))
  await listener.subscribe(channel)

  const tenant = await createTenant(a)
  const { token: v0, user } = await issueToken(a, tenant, 'alice')
  for (const node of nodes) t.equal((await verify(node, v0)).statusCode, 200, 'v0 accepted (and cached) before the revocation')

  const seenBefore = seen.length
  t.equal((await invalidate(b, tenant, user.id)).statusCode, 200)
  await until('the genuine message to be seen', () => seen.length > seenBefore)
  const genuine = seen.at(-1)!
  for (const node of nodes) t.equal((await verify(node, v0)).json().code, 'TOKEN_REVOKED', 'v0 revoked everywhere')
  const { token: v1 } = await issueToken(c, tenant, 'alice')
  for (const node of nodes) t.equal((await verify(node, v1)).statusCode, 200, 'v1 accepted (and cached)')

  const rejectedBefore = await Promise.all(nodes.map(rejectedCount))

  // 1. Forged: the message shape of the unauthenticated bus, un-revoking alice for good.
  const state = { id: user.id, companyId: tenant.companyId, externalId: 'alice', agentId: tenant.agentId, tokenVersion: 0, active: true, revision: 1e12 }
  const forgeries = [
    JSON.stringify({ t: 'c', id: 'evil.1', from: 'evil', c: { kind: 'user', state } }),
    JSON.stringify({ t: 'c', id: 'evil.2', from: 'evil', c: { kind: 'user', id: user.id, revision: 1e12 } }),
    'not json at all',
  ]
  // 2. Tampered: the genuine message with each value changed in turn (state, revision, ids).
  const tampered: string[] = []
  const parsed = JSON.parse(genuine) as Record<string, unknown>
  for (const [field, value] of Object.entries(parsed)) {
    if (typeof value === 'number') tampered.push(JSON.stringify({ ...parsed, [field]: value + 1e9 }))
    else if (typeof value === 'string') tampered.push(JSON.stringify({ ...parsed, [field]: value.slice(0, -1) + (value.endsWith('0') ? '1' : '0') }))
    else if (typeof value === 'object' && value !== null) tampered.push(JSON.stringify({ ...parsed, [field]: { ...value, tokenVersion: 0, revision: 1e12 } }))
  }
  tampered.push(genuine.replace(/"revision":\d+/, '"revision":1000000000000').replace(/"tokenVersion":\d+/, '"tokenVersion":0'))
  // 3. Replayed: the genuine message again, as is.
  const replays = [genuine, genuine]

  // Each kind of attack on its own: a message that one kind lets through must not be
  // masked by a cache flush that another kind causes.
  const attack = async (what: string, payloads: string[]) => {
    for (const payload of payloads) await attacker.publish(channel, payload)
    // Every node has handled them once a message published after them has reached a subscriber.
    const marker = seen.length
    await attacker.publish(channel, JSON.stringify({ t: 'pad' }))
    await until('the attack to reach the subscribers', () => seen.length > marker)
    await sleep(50)
    for (const [i, node] of nodes.entries()) {
      t.equal((await verify(node, v0)).json().code, 'TOKEN_REVOKED', `${what}: node ${i} still refuses the revoked token`)
    }
  }
  await attack('forged', forgeries.slice(0, 2))
  await attack('tampered', tampered.filter((p) => p !== genuine))
  await attack('replayed', replays)
  await attack('malformed', forgeries.slice(2))

  const rejectedAfter = await Promise.all(nodes.map(rejectedCount))
  for (const [i] of nodes.entries()) t.ok(rejectedAfter[i]! > rejectedBefore[i]!, `node ${i}: the rejected messages are counted in /metrics`)

  // A later real invalidation still takes effect on every node at once.
  t.equal((await invalidate(a, tenant, user.id)).statusCode, 200)
  for (const [i, node] of nodes.entries()) {
    t.equal((await verify(node, v1)).json().code, 'TOKEN_REVOKED', `node ${i}: the next real invalidation is applied`)
    t.equal((await verify(node, v0)).json().code, 'TOKEN_REVOKED', `node ${i}: and v0 stays refused`)
  }
  const { token: v2 } = await issueToken(b, tenant, 'alice')
  for (const node of nodes) t.equal((await verify(node, v2)).statusCode, 200, 'the current token is accepted')

  // Deactivation too: the forged "active: true, revision: 1e12" blocks nothing.
  t.equal((await a.admin('PATCH', `/admin/v1/customer-users/${user.id}`, { active: false })).statusCode, 200)
  for (const [i, node] of nodes.entries()) t.equal((await verify(node, v2)).json().code, 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE', `node ${i}: deactivation applied`)
})
