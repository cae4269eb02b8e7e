import { performance } from 'node:perf_hooks'
import { randomUUID } from 'node:crypto'
import Fastify, { type FastifyInstance } from 'fastify'
import t, { type Test } from 'tap'
import { loadConfig } from '../../../src/config.js'
import { chatAuthPlugin, type ChatSession } from '../../../src/plugin.js'
import { createTenant, decodeToken, forgeHs256, freshPostgresDatabase, hs256Kid, invalidate, issueToken, JWT_SECRET, post, startApp, verify, type Tenant, type TestApp } from '../../support/helpers.js'
import { startTcpProxy } from '../../support/tcp-proxy.js'

/**
 * SPEC §8.1: sessions opened in the in-process verifier (chatAuthPlugin's openChatSession)
 * end the moment their token stops being valid. Two nodes over one PostgreSQL database and
 * Redis: a gateway (startApp) that makes the changes, and the plugin's own node, whose
 * sessions must be aborted before the gateway's call answers.
 */
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const LEASE_MS = 600

type Open = Extract<ChatSession, { ok: true }>

interface Nodes {
  gateway: TestApp
  chat: FastifyInstance
  tenant: Tenant
}

async function twoNodes(t: Test, pluginRedisUrl = REDIS_URL): Promise<Nodes> {
  const env = { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL, REDIS_PREFIX: `chat-auth-test-sessions-${process.pid}-${randomUUID().slice(0, 8)}`, CACHE_LEASE_MS: String(LEASE_MS) }
  const gateway = await startApp(t, env)
  const chat = Fastify()
  t.teardown(() => chat.close())
  await chat.register(chatAuthPlugin, { config: loadConfig({ ...env, REDIS_URL: pluginRedisUrl, JWT_SECRET, LOG_LEVEL: 'silent' }) })
  await chat.ready()
  return { gateway, chat, tenant: await createTenant(gateway) }
}

async function open(t: Test, chat: FastifyInstance, token: string): Promise<Open & { abortedAt: () => number | undefined }> {
  const session = await chat.openChatSession(token)
  if (!session.ok) throw new Error(`refused: ${JSON.stringify(session)}`)
  t.teardown(() => session.close())
  let abortedAt: number | undefined
  session.signal.addEventListener('abort', () => (abortedAt = performance.now()), { once: true })
  return Object.assign(session, { abortedAt: () => abortedAt })
}

/** Runs the call; the session's abort must come before its answer. */
async function abortedBeforeAnswer(t: Test, session: Awaited<ReturnType<typeof open>>, call: () => Promise<{ statusCode: number; body: string }>, code: string, message: string) {
  t.notOk(session.signal.aborted, 'open before the call')
  const answer = await call()
  const answeredAt = performance.now()
  t.equal(answer.statusCode, 200, answer.body)
  const abortedAt = session.abortedAt()
  t.ok(abortedAt !== undefined && abortedAt <= answeredAt, `aborted ${abortedAt === undefined ? 'never' : `${(answeredAt - abortedAt).toFixed(1)} ms`} before the answer`)
  t.same(session.signal.reason, { code, message })
}

t.test('a refused token: the verify endpoint\'s status and body, nothing kept', async (t) => {
  const { gateway, chat, tenant } = await twoNodes(t)
  const issued = await issueToken(gateway, tenant, 'refused')
  t.equal((await invalidate(gateway, tenant, issued.user.id)).statusCode, 200)
  const forged = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...decodeToken(issued.token).payload, exp: Math.floor(Date.now() / 1000) - 10 })
  for (const token of [undefined, '', 'not-a-jwt', issued.token, forged]) {
    const expected = await verify(gateway, token || undefined)
    t.same(await chat.openChatSession(token), { ok: false, statusCode: expected.statusCode, body: expected.json() }, `${expected.json().code}`)
  }
  t.same(chat.chatSessionStats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
})

t.test('each revocation and deactivation aborts its sessions before its call answers', async (t) => {
  const { gateway, chat, tenant } = await twoNodes(t)

  await t.test('an accepted token: the verify endpoint\'s 200 body', async (t) => {
    const issued = await issueToken(gateway, tenant, 'identity')
    const session = await open(t, chat, issued.token)
    t.same(session.identity, (await verify(gateway, issued.token)).json())
    t.equal(chat.chatSessionStats().open, 1)
  })

  await t.test('invalidate-token', async (t) => {
    const issued = await issueToken(gateway, tenant, 'inv')
    const session = await open(t, chat, issued.token)
    await abortedBeforeAnswer(t, session, () => invalidate(gateway, tenant, issued.user.id), 'TOKEN_REVOKED', 'Token has been revoked')
  })

  await t.test('revoke-token: that jti alone, the user\'s other session stays open', async (t) => {
    const first = await issueToken(gateway, tenant, 'device')
    const second = await issueToken(gateway, tenant, 'device')
    const one = await open(t, chat, first.token)
    const other = await open(t, chat, second.token)
    await abortedBeforeAnswer(t, one, () => post(gateway, '/rest/v1/auth/revoke-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, token: first.token }), 'TOKEN_REVOKED', 'Token has been revoked')
    t.notOk(other.signal.aborted, 'the other token of the same user is still open')
  })

  await t.test('user deactivation', async (t) => {
    const issued = await issueToken(gateway, tenant, 'leaver')
    const session = await open(t, chat, issued.token)
    await abortedBeforeAnswer(t, session, () => gateway.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false }), 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE', 'Customer user not found or inactive')
  })

  await t.test('agent revoke-tokens, then company revoke-tokens', async (t) => {
    const other = await createTenant(gateway, 'Other')
    const outside = await open(t, chat, (await issueToken(gateway, other, 'outsider')).token)
    const byAgent = await open(t, chat, (await issueToken(gateway, tenant, 'agent-one')).token)
    await abortedBeforeAnswer(t, byAgent, () => gateway.admin('POST', `/admin/v1/agents/${tenant.agentId}/revoke-tokens`), 'TOKEN_REVOKED', 'Token has been revoked')
    const byCompany = await open(t, chat, (await issueToken(gateway, tenant, 'company-one')).token)
    await abortedBeforeAnswer(t, byCompany, () => gateway.admin('POST', `/admin/v1/companies/${tenant.companyId}/revoke-tokens`), 'TOKEN_REVOKED', 'Token has been revoked')
    t.notOk(outside.signal.aborted, "another company's session stays open")
    t.same(chat.chatSessionStats(), { open: 1, users: 1, companies: 1, agents: 1, jtis: 1, expiries: 1 }, 'only it is left in the indexes')
  })

  await t.test('agent deactivation', async (t) => {
    const session = await open(t, chat, (await issueToken(gateway, tenant, 'agent-user')).token)
    await abortedBeforeAnswer(t, session, () => gateway.admin('PATCH', `/admin/v1/agents/${tenant.agentId}`, { active: false }), 'AGENT_INACTIVE', 'Agent is inactive')
  })

  t.same(chat.chatSessionStats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 }, 'every session ended or was closed: the indexes are empty again')
})

t.test('expiry: aborted at exp + JWT_CLOCK_TOLERANCE with TOKEN_EXPIRED', async (t) => {
  const { gateway, chat, tenant } = await twoNodes(t)
  const issued = await issueToken(gateway, tenant, 'short')
  const exp = Math.floor(Date.now() / 1000) + 2
  const short = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...decodeToken(issued.token).payload, exp, jti: randomUUID() })
  const session = await open(t, chat, short)
  const long = await open(t, chat, issued.token)
  await new Promise<void>((resolve) => session.signal.addEventListener('abort', () => resolve(), { once: true }))
  const late = Date.now() - exp * 1000
  t.ok(late >= 0 && late < 2000, `aborted ${late} ms after exp`)
  t.same(session.signal.reason, { code: 'TOKEN_EXPIRED', message: 'Token has expired' })
  t.equal((await verify(gateway, short)).json().code, 'TOKEN_EXPIRED', 'as verify answers')
  t.notOk(long.signal.aborted)
  long.close()
  long.close()
  t.same(chat.chatSessionStats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 }, 'close() is idempotent and frees everything')
})

t.test('close() frees, the gauge counts open sessions, and a closing node aborts with NODE_CLOSING', async (t) => {
  const gateway = await startApp(t)
  const tenant = await createTenant(gateway)
  const chat = Fastify()
  await chat.register(chatAuthPlugin, { gateway: gateway.gateway })
  const tokens = await Promise.all(['a', 'b', 'c'].map((user) => issueToken(gateway, tenant, user)))
  const sessions = await Promise.all(tokens.map(({ token }) => open(t, chat, token)))
  const gauge = async () => Number(/^chat_auth_open_sessions (\d+)$/m.exec((await gateway.inject({ method: 'GET', url: '/metrics' })).body)?.[1])
  t.equal(await gauge(), 3)
  t.same(chat.chatSessionStats(), { open: 3, users: 3, companies: 1, agents: 1, jtis: 3, expiries: 3 })
  sessions[0]!.close()
  t.notOk(sessions[0]!.signal.aborted, 'close() ends watching without an abort')
  t.equal(await gauge(), 2)
  await gateway.app.close()
  for (const session of sessions.slice(1)) t.same(session.signal.reason, { code: 'NODE_CLOSING', message: 'The node is shutting down' })
  t.same(chat.chatSessionStats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
  const refused = await chat.openChatSession(tokens[0]!.token)
  t.match(refused, { ok: false, statusCode: 503, body: { statusCode: 503, code: 'SERVICE_UNAVAILABLE' } }, 'a closed node opens no session')
  await chat.close()
})

t.test('a Redis blip aborts nothing; while the node cannot trust its cache it re-checks its sessions against the store', async (t) => {
  const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379))
  t.teardown(() => proxy.close())
  const { gateway, chat, tenant } = await twoNodes(t, `redis://127.0.0.1:${proxy.port}`)
  const kept = await open(t, chat, (await issueToken(gateway, tenant, 'kept')).token)
  const missed = await issueToken(gateway, tenant, 'missed')
  const revoked = await open(t, chat, missed.token)

  t.equal(await proxy.reset(':sub:'), 1, "the plugin node's subscriber connection is reset")
  await new Promise((resolve) => setTimeout(resolve, 3 * LEASE_MS))
  t.notOk(kept.signal.aborted, 'a reset subscriber aborts nothing')

  t.equal(await proxy.blackhole(':sub:'), 1, 'the subscriber goes silent: the node stops trusting its cache')
  await new Promise((resolve) => setTimeout(resolve, 2 * LEASE_MS))
  t.notOk(kept.signal.aborted, 'the node re-checks against the store, and nothing changed')
  // The change's message never reaches the plugin node: the writer waits out its lease.
  t.equal((await invalidate(gateway, tenant, missed.user.id)).statusCode, 200)
  const answeredAt = performance.now()
  while (!revoked.signal.aborted && performance.now() - answeredAt < 5 * LEASE_MS) await new Promise((resolve) => setTimeout(resolve, 20))
  const after = revoked.abortedAt()
  // (usually before it: the writer waits out the silent node's lease, the node re-checks once per lease)
  const gap = after === undefined ? undefined : Math.round(after - answeredAt)
  t.ok(gap !== undefined && gap <= LEASE_MS + 500, `a missed change ended its session ${gap === undefined ? 'never' : gap <= 0 ? `${-gap} ms before the answer` : `${gap} ms after the answer`} (bound: a lease + a store read after it)`)
  t.same(revoked.signal.reason, { code: 'TOKEN_REVOKED', message: 'Token has been revoked' })
  t.notOk(kept.signal.aborted, 'the other session is still open')
})
