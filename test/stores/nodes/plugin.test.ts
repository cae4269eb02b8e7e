import { spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { Writable } from 'node:stream'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Fastify from 'fastify'
import { pino } from 'pino'
import t from 'tap'
import { loadConfig } from '../../../src/config.js'
import { chatAuthPlugin } from '../../../src/plugin.js'
import { createTenant, decodeToken, forgeHs256, freshPostgresDatabase, hs256Kid, invalidate, issueToken, JWT_SECRET, startApp, STORE } from '../../support/helpers.js'
import { migratedPglite } from '../../support/pglite-template.js'

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

t.test('a Node chat backend verifies in-process with the same checks and stores', async (t) => {
  const gatewayNode = await startApp(t)
  const tenant = await createTenant(gatewayNode)
  const issued = await issueToken(gatewayNode, tenant, 'chatter')

  const chat = Fastify()
  t.teardown(() => chat.close())
  await chat.register(chatAuthPlugin, { gateway: gatewayNode.gateway })
  chat.get('/messages', { preHandler: chat.requireChatToken }, async (request) => ({ for: request.chatAuth!.user.externalId }))
  chat.get('/public', async (request) => ({ identity: request.chatAuth }))
  // As an onRequest hook (the guide's way) the token is checked before any body is read.
  chat.post('/messages', { onRequest: chat.requireChatToken }, async (request) => ({ got: request.body }))

  const allowed = await chat.inject({ url: '/messages', headers: { authorization: `Bearer ${issued.token}` } })
  t.equal(allowed.statusCode, 200)
  t.same(allowed.json(), { for: 'chatter' })
  t.same((await chat.inject({ url: '/public' })).json(), { identity: null }, 'unprotected routes see no identity')

  const unread = await chat.inject({ method: 'POST', url: '/messages', headers: { 'content-type': 'application/json' }, payload: '{"not json' })
  t.equal(unread.statusCode, 401, 'no token: 401 before the malformed body is parsed')
  const posted = await chat.inject({ method: 'POST', url: '/messages', headers: { authorization: `Bearer ${issued.token}` }, payload: { text: 'hi' } })
  t.same(posted.json(), { got: { text: 'hi' } })

  const missing = await chat.inject({ url: '/messages' })
  t.equal(missing.statusCode, 401)
  t.same(missing.json(), { statusCode: 401, message: 'Missing bearer token', code: 'MISSING_BEARER_TOKEN' })
  t.equal(missing.headers['www-authenticate'], 'Bearer error="invalid_token"')

  t.equal((await invalidate(gatewayNode, tenant, issued.user.id)).statusCode, 200)
  const revoked = await chat.inject({ url: '/messages', headers: { authorization: `Bearer ${issued.token}` } })
  t.equal(revoked.statusCode, 401)
  t.same(revoked.json(), { statusCode: 401, message: 'Token has been revoked', code: 'TOKEN_REVOKED' })
})

t.test('a store that is away: the plugin answers 503, logs the cause once per interval and counts every one', async (t) => {
  const db = await migratedPglite()
  const gatewayNode = await startApp(t, { DATA_DIR: 'memory://' }, { db })
  const issued = await issueToken(gatewayNode, await createTenant(gatewayNode), 'away')
  const { payload } = decodeToken(issued.token)
  const logs: string[] = []
  const chat = Fastify({ loggerInstance: pino(new Writable({ write: (chunk, _enc, done) => (logs.push(String(chunk)), done()) })) })
  t.teardown(() => chat.close())
  await chat.register(chatAuthPlugin, { gateway: gatewayNode.gateway })
  chat.get('/messages', { preHandler: chat.requireChatToken }, async () => ({}))
  await db.close()
  const statuses: number[] = []
  for (let i = 0; i < 100; i++) {
    const token = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...payload, sub: randomUUID(), jti: randomUUID() })
    statuses.push((await chat.inject({ url: '/messages', headers: { authorization: `Bearer ${token}` } })).statusCode)
  }
  t.ok(statuses.every((status) => status === 503), 'every request is a 503')
  const causes = logs.filter((line) => line.includes('verification could not be decided'))
  t.ok(causes.length >= 1 && causes.length <= 2, `the cause logged ${causes.length} times for 100 answers`)
  t.match((await gatewayNode.inject({ method: 'GET', url: '/metrics' })).body, /^chat_auth_verify_unavailable_total 100$/m, "counted on the gateway's /metrics")
})

t.test('the plugin never opens an embedded store of its own: it says what it needs', async (t) => {
  const parent = await mkdtemp(join(tmpdir(), 'chat-auth-plugin-'))
  t.teardown(() => rm(parent, { recursive: true, force: true }))
  const dataDir = join(parent, 'data')
  for (const [env, missing] of [
    [{ DATA_DIR: dataDir }, /^DATABASE_URL and REDIS_URL: the in-process verifier joins the gateway as one more node/],
    [{ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }, /^REDIS_URL: /],
  ] as const) {
    const chat = Fastify()
    t.teardown(() => chat.close())
    const config = loadConfig({ ...env, JWT_SECRET, LOG_LEVEL: 'silent' })
    await t.rejects(async () => {
      await chat.register(chatAuthPlugin, { config })
      await chat.ready()
    }, { name: 'ConfigError', message: missing })
  }
  t.notOk(existsSync(dataDir), 'no PGlite folder was created')
})

t.test('the plugin joins the gateway over PostgreSQL and Redis, and closes its node with the Fastify instance', { skip: STORE === 'postgres' ? false : 'runs in the PostgreSQL pass' }, async (t) => {
  const env = { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL, REDIS_PREFIX: `chat-auth-test-plugin-${process.pid}` }
  const gatewayNode = await startApp(t, env)
  const tenant = await createTenant(gatewayNode)
  const issued = await issueToken(gatewayNode, tenant, 'chatter')

  const chat = Fastify()
  await chat.register(chatAuthPlugin, { config: loadConfig({ ...env, JWT_SECRET, LOG_LEVEL: 'silent' }) })
  chat.get('/messages', { preHandler: chat.requireChatToken }, async (request) => ({ for: request.chatAuth!.user.externalId }))
  const call = () => chat.inject({ url: '/messages', headers: { authorization: `Bearer ${issued.token}` } })
  t.equal((await call()).statusCode, 200)
  t.equal((await call()).statusCode, 200, 'and again, from its cache')
  t.equal((await invalidate(gatewayNode, tenant, issued.user.id)).statusCode, 200)
  t.equal((await call()).statusCode, 401, 'a change made on the gateway reaches the in-process verifier before the write answers')

  const claims = async () => Number((await gatewayNode.gateway.db.query<{ n: string }>("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"))[0]!.n)
  t.equal(await claims(), 2, 'the gateway and the plugin each hold a shared claim')
  await chat.close()
  t.equal(await claims(), 1, "closing the Fastify instance closed the plugin's node")
})

t.test("the live revocation guide's plugin example lets the process exit once the app is closed", async (t) => {
  const example = [...readFileSync(new URL('../../../docs/live-revocation.md', import.meta.url), 'utf8').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).find((block) => block.includes('chatAuthPlugin')) ?? ''
  t.match(example, /app\.register\(chatAuthPlugin, \{ config \}\)/, 'the guide registers the plugin with the configuration')
  t.match(example, /\{ onRequest: app\.requireChatToken \}/, 'the guide checks the token on request, before any body is read')
  // The guide's wiring, then a close: the process must end by itself (nothing left open).
  const script = `
    import Fastify from 'fastify'
import { pino } from 'pino'
    import { chatAuthPlugin, loadConfig } from './dist/src/index.js'
    const config = loadConfig()
    const app = Fastify({ pluginTimeout: 120_000 }) // (the guide's Fastify(), with room for a busy test machine)
    await app.register(chatAuthPlugin, { config })
    app.get('/messages', { onRequest: app.requireChatToken }, async (req) => req.chatAuth.user)
    await app.ready()
    await app.close()
    console.log('closed')`
  const env = STORE === 'postgres' ? { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL, REDIS_PREFIX: `chat-auth-test-plugin-exit-${process.pid}` } : undefined
  if (!env) return t.pass('runs in the PostgreSQL pass')
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: fileURLToPath(new URL('../../../', import.meta.url)),
    env: { PATH: process.env.PATH, ...env, JWT_SECRET, LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: 30_000,
  })
  t.equal(child.stdout.trim(), 'closed', child.stderr)
  t.equal(child.status, 0, 'the process exited by itself after app.close()')
})
