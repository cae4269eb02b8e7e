/**
 * SPEC §8.3: the example chat server (src/example/) driven as a person would, in real
 * headless Chromium (Debian's `chromium`; where it is missing, the test skips and says so):
 * the page gets a token from the example's stand-in customer backend, which calls a gateway
 * node over HTTP; its WebSocket reaches the plugin's own node, over one PostgreSQL database
 * and Redis. Messages pass between two pages; an invalidation, a single-token revoke and an
 * agent deactivation each close the page's socket with 4001 and the §3.3 message before the
 * revoking call has answered (the page's close time against the test's answer time, one
 * machine, one clock); a reconnect with the old token is refused with 4001 and nothing it
 * sends reaches anyone. The store matrix runs this file once (it makes its own database).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join as joinPath } from 'node:path'
import { performance } from 'node:perf_hooks'
import { randomUUID } from 'node:crypto'
import { chromium, type Browser, type Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { loadConfig } from '../../src/config.js'
import { buildChatExample } from '../../src/example/chat-server.js'
import { locate, missing } from '../setup/tools.js'
import { ADMIN_TOKEN, createTenant, freshPostgresDatabase, JWT_SECRET, startApp } from '../support/helpers.js'

/** how long after the server closed a socket the page's close event may still be on its way (the browser's process and scheduling) */
const PAGE_DELIVERY_MS = 250
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'

/** what the page keeps in `window.chat` (src/example/page.ts) */
interface PageState {
  token: string | null
  user: { id: string; externalId: string; agentId: string } | null
  ready: boolean
  frames: { type: string; text?: string; from?: string; receivedAt: number }[]
  closes: { code: number; reason: string; at: number }[]
}

/** the same clock as the page's: the wall-clock origin of this process plus its monotonic time */
const now = () => performance.timeOrigin + performance.now()

async function launch(t: Test): Promise<Browser> {
  const home = mkdtempSync(joinPath(tmpdir(), 'chat-auth-chromium-'))
  t.teardown(() => rmSync(home, { recursive: true, force: true }))
  // Playwright adds --headless and a fresh --user-data-dir of its own.
  const browser = await chromium.launch({
    executablePath: locate('chromium')!,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    env: { ...process.env, HOME: home },
  })
  t.teardown(() => browser.close())
  return browser
}

const state = (page: Page): Promise<PageState> => page.evaluate(() => (globalThis as unknown as { chat: PageState }).chat)

/** Joins the chat as `userId` through the page's form, once the server said the session is open. */
async function join(browser: Browser, base: string, userId: string): Promise<{ page: Page; token: string; user: NonNullable<PageState['user']> }> {
  const page = await browser.newPage()
  await page.goto(base)
  await page.fill('input[name=userId]', userId)
  await page.click('#join button')
  await page.waitForFunction(() => (globalThis as unknown as { chat: PageState }).chat.ready)
  const { token, user } = await state(page)
  return { page, token: token!, user: user! }
}

async function say(page: Page, text: string): Promise<void> {
  await page.fill('input[name=text]', text)
  await page.click('#send button')
}

/** Waits until `page` has received a chat message `text`; returns every message it received so far. */
async function heard(page: Page, text: string): Promise<string[]> {
  await page.waitForFunction((text) => (globalThis as unknown as { chat: PageState }).chat.frames.some((f) => f.type === 'message' && f.text === text), text)
  return (await state(page)).frames.filter((f) => f.type === 'message').map((f) => `${f.from}: ${f.text}`)
}

async function call(base: string, method: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown; answeredAt: number }> {
  const answer = await fetch(base + path, { method, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  // the moment the caller learns the answer: its status line and headers arrived
  const answeredAt = now()
  return { status: answer.status, body: await answer.json(), answeredAt }
}

t.test('the example chat in Chromium: messages pass; every revocation closes the socket with 4001 before it answers; the old token is refused', { skip: missing('chromium') }, async (t) => {
  const env = { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL, REDIS_PREFIX: `chat-auth-test-example-${process.pid}-${randomUUID().slice(0, 8)}` }
  const gateway = await startApp(t, env)
  const gatewayUrl = await gateway.app.listen({ port: 0, host: '127.0.0.1' })
  const tenant = await createTenant(gateway)
  const example = await buildChatExample({
    config: loadConfig({ ...env, JWT_SECRET, LOG_LEVEL: 'silent' }),
    gatewayUrl,
    keyId: tenant.keyId,
    keySecret: tenant.keySecret,
  })
  t.teardown(() => example.close())
  // When the server closed each socket (by its user's external id): the moment the close
  // frame was written, on this process's clock, to order against the call's answer exactly.
  const serverClosedAt = new Map<string, number>()
  example.websocketServer.on('connection', (socket, request) => {
    const close = socket.close.bind(socket)
    socket.close = (code?: number, reason?: string | Buffer) => {
      if (code === 4001) serverClosedAt.set(String(request.headers['sec-websocket-protocol']), serverClosedAt.get(String(request.headers['sec-websocket-protocol'])) ?? now())
      close(code, reason)
    }
  })
  const base = await example.listen({ port: 0, host: '127.0.0.1' })
  await t.test('the stand-in backend: the gateway\'s token, its refusals passed on, bad input 400', async (t) => {
    const issued = await example.inject({ method: 'POST', url: '/token', payload: { userId: 'carol' } })
    t.equal(issued.statusCode, 200)
    t.same(Object.keys(issued.json()), ['token', 'user', 'expiresAt'], 'the token, its user and expiry: never the API key')
    t.same((await example.inject({ method: 'POST', url: '/token', payload: {} })).json(), { statusCode: 400, message: "body must have required property 'userId'", code: 'VALIDATION_ERROR' })
    const wrongKey = await buildChatExample({ config: loadConfig({ ...env, JWT_SECRET, LOG_LEVEL: 'silent' }), gatewayUrl, keyId: tenant.keyId, keySecret: 'wrong' })
    t.teardown(() => wrongKey.close())
    const refused = await wrongKey.inject({ method: 'POST', url: '/token', payload: { userId: 'carol' } })
    t.same([refused.statusCode, refused.json()], [401, { statusCode: 401, message: 'Invalid API credentials', code: 'INVALID_API_CREDENTIALS' }])
  })

  const browser = await launch(t)
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }

  const alice = await join(browser, base, 'alice')
  const bob = await join(browser, base, 'bob')
  await say(alice.page, 'hello from alice')
  t.same(await heard(bob.page, 'hello from alice'), ['alice: hello from alice'], 'bob hears alice')
  await say(bob.page, 'hi alice')
  t.same(await heard(alice.page, 'hi alice'), ['alice: hello from alice', 'bob: hi alice'], 'alice hears bob, and her own message')

  /**
   * A fresh user joins; `revoke` ends their token; the page's socket must be closed with 4001
   * and `message` before the call answered. Then the page reconnects with the same token and
   * sends at once: refused with 4001, no frame reaches the page, and bob never hears it.
   */
  async function closedBeforeAnswer(t: Test, name: string, revoke: (joined: Awaited<ReturnType<typeof join>>) => Promise<{ status: number; body: unknown; answeredAt: number }>, message: string) {
    const joined = await join(browser, base, `${name}-${randomUUID().slice(0, 8)}`)
    t.same((await state(joined.page)).closes, [], 'open before the call')
    const answer = await revoke(joined)
    t.equal(answer.status, 200, JSON.stringify(answer.body))
    await joined.page.waitForFunction(() => (globalThis as unknown as { chat: PageState }).chat.closes.length === 1)
    const [closed] = (await state(joined.page)).closes
    t.same({ code: closed!.code, reason: closed!.reason }, { code: 4001, reason: message }, 'closed with 4001 and the §3.3 message')
    const serverClose = serverClosedAt.get(`chat, bearer.${joined.token}`)
    t.ok(serverClose !== undefined && serverClose <= answer.answeredAt, `the server closed the socket ${serverClose === undefined ? 'never' : `${(answer.answeredAt - serverClose).toFixed(1)} ms`} before the call answered`)
    // The page is another process: its close event follows the close frame's delivery and its
    // own scheduling, so on a loaded machine it may come after the answer; measured, bounded.
    const gap = answer.answeredAt - closed!.at
    t.ok(gap > -PAGE_DELIVERY_MS, `the page saw the close ${gap.toFixed(1)} ms before the answer (after it by at most ${PAGE_DELIVERY_MS} ms of delivery)`)
    t.comment(`${name}: server close → answer ${serverClose === undefined ? '?' : (answer.answeredAt - serverClose).toFixed(2)} ms; page close event → answer ${gap.toFixed(2)} ms`)

    const framesBefore = (await state(joined.page)).frames.length
    await joined.page.evaluate(() => {
      const socket = (globalThis as unknown as { connect: () => WebSocket }).connect()
      socket.addEventListener('open', () => socket.send(JSON.stringify({ text: 'sent with a revoked token' })))
    })
    await joined.page.waitForFunction(() => (globalThis as unknown as { chat: PageState }).chat.closes.length === 2)
    const after = await state(joined.page)
    t.same({ code: after.closes[1]!.code, reason: after.closes[1]!.reason }, { code: 4001, reason: message }, 'a reconnect with the old token: 4001 and the same message')
    t.equal(after.frames.length, framesBefore, 'the refused socket received nothing (no ready, no message)')
    t.notOk(after.ready, 'and the page cannot send')
    // bob's socket is FIFO: a message passed on from the refused socket would reach him before this one
    const marker = `marker ${name}`
    await say(bob.page, marker)
    t.notOk((await heard(bob.page, marker)).some((line) => line.includes('sent with a revoked token')), 'nobody heard what the refused socket sent')
    await joined.page.close()
  }

  await t.test('invalidate-token', (t) =>
    closedBeforeAnswer(t, 'invalidated', (joined) => call(gatewayUrl, 'POST', '/rest/v1/auth/invalidate-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, customerUserId: joined.user.id }), 'Token has been revoked'),
  )

  await t.test('revoke-token of that one token', (t) =>
    closedBeforeAnswer(t, 'revoked', (joined) => call(gatewayUrl, 'POST', '/rest/v1/auth/revoke-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, token: joined.token }), 'Token has been revoked'),
  )

  await t.test('agent deactivation', async (t) => {
    // A second agent, made the company's default, so that only the new user's session is
    // on it: alice and bob (on the first agent) stay in the chat.
    const agent = await call(gatewayUrl, 'POST', `/admin/v1/companies/${tenant.companyId}/agents`, { name: 'Second agent' }, admin)
    const agentId = (agent.body as { id: string }).id
    t.equal((await call(gatewayUrl, 'PATCH', `/admin/v1/companies/${tenant.companyId}`, { defaultAgentId: agentId }, admin)).status, 200)
    await closedBeforeAnswer(
      t,
      'agent',
      async (joined) => {
        t.equal(joined.user.agentId, agentId, 'the new user is on the second agent')
        return call(gatewayUrl, 'PATCH', `/admin/v1/agents/${agentId}`, { active: false }, admin)
      },
      'Agent is inactive',
    )
  })

  t.same((await state(alice.page)).closes, [], 'alice is still in the chat')
  t.same(example.chatSessionStats().open, 2, 'only alice\'s and bob\'s sessions are open')
})
