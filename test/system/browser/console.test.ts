/**
 * SPEC §10.3: the console in real headless Chromium (Debian's `chromium`; where it is missing
 * the test skips and says so, and fails under CI=true), against two node processes from
 * dist/ over one PostgreSQL database and a Redis of their own. An admin signs in by keyboard
 * and creates a viewer and an operator; the operator finds a user by external id and revokes
 * all their tokens by keyboard, and the receipt lists both nodes while both refuse the old
 * token; the viewer sees no write action and the API answers its direct write 403; the CSP
 * holds (an injected inline script does not run); no storage the page can read holds a
 * token; sign-out ends the session on both nodes. With CONSOLE_SCREENSHOTS=1 it writes the
 * screenshots under docs/. The store matrix runs this file once (it makes its own database).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core'
import t, { type Test } from 'tap'
import { locate, missing } from '../../setup/tools.js'
import { ADMIN_TOKEN } from '../../support/constants.js'
import { freshPostgresDatabase } from '../../support/databases.js'
import { admin, call, setupCompany, verify } from '../../support/http-client.js'
import { startGatewayProcess } from '../../support/processes.js'
import { startRedis, type RedisServer } from '../../support/services.js'

const DOCS = fileURLToPath(new URL('../../../docs/', import.meta.url))
const SCREENSHOTS = process.env.CONSOLE_SCREENSHOTS === '1'
const FORBIDDEN = { statusCode: 403, message: 'Insufficient role', code: 'FORBIDDEN' }
/** every button a write would start from, by its label */
const WRITE_LABEL = /revoke|deactivate|activate|create|delete|redeliver/i

async function launch(t: Test): Promise<Browser> {
  const home = mkdtempSync(join(tmpdir(), 'chat-auth-chromium-'))
  t.teardown(() => rmSync(home, { recursive: true, force: true }))
  const browser = await chromium.launch({
    executablePath: locate('chromium')!,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    env: { ...process.env, HOME: home },
  })
  t.teardown(() => browser.close())
  return browser
}

/** A browser context whose pages record every CSP violation (a CDP-injected script, which the CSP does not govern). */
async function newContext(browser: Browser): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1360, height: 860 }, locale: 'en-GB', timezoneId: 'Europe/Berlin' })
  await context.addInitScript(() => {
    const seen: string[] = []
    ;(globalThis as unknown as { cspViolations: string[] }).cspViolations = seen
    document.addEventListener('securitypolicyviolation', (event) => seen.push(`${event.violatedDirective} ${event.blockedURI}`))
  })
  return context
}

const violations = (page: Page) => page.evaluate(() => (globalThis as unknown as { cspViolations: string[] }).cspViolations)

/** Presses Tab until the focused element is `selector` (and holds `text`, when given); fails past `max` presses. */
async function tabTo(page: Page, selector: string, text?: string, max = 80): Promise<void> {
  for (let presses = 0; presses <= max; presses++) {
    const there = await page.evaluate(
      ([selector, text]) => {
        const focused = document.activeElement
        return focused !== null && focused.matches(selector!) && (text === undefined || focused.textContent?.trim() === text)
      },
      [selector, text] as const,
    )
    if (there) return
    await page.keyboard.press('Tab')
  }
  throw new Error(`Tab never reached ${selector}${text === undefined ? '' : ` "${text}"`}`)
}

/** Signs in by keyboard alone: the token field has the focus, Enter submits. */
async function signInByKeyboard(page: Page, base: string, token: string, path = '/console/nodes'): Promise<void> {
  await page.goto(base + path)
  await page.waitForURL(/\/console\/sign-in/)
  await tabTo(page, '#token')
  await page.keyboard.type(token)
  await page.keyboard.press('Enter')
  await page.waitForURL((url) => !url.pathname.startsWith('/console/sign-in'))
  await page.locator('main h1').first().waitFor()
}

async function screenshot(page: Page, name: string): Promise<void> {
  if (!SCREENSHOTS) return
  await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur())
  await page.screenshot({ path: join(DOCS, name), fullPage: true })
}

/** What every storage the page's script can read holds, as one string. */
const readableStorage = (page: Page) =>
  page.evaluate(async () => {
    const databases = (await indexedDB.databases?.()) ?? []
    return JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage }, cookie: document.cookie, indexedDB: databases.map((d) => d.name) })
  })

/** The session cookie the browser holds for `base` (the page cannot read it: HttpOnly). */
async function sessionCookie(context: BrowserContext, base: string): Promise<string> {
  const cookie = (await context.cookies(base)).find((c) => c.name === 'chat_auth_console')
  if (cookie === undefined) throw new Error('no chat_auth_console cookie')
  return `${cookie.name}=${cookie.value}`
}

/** The node ids in the bus's registry (`<prefix>:nodes`): the nodes a change goes out to. */
async function registeredNodes(redis: RedisServer): Promise<string[]> {
  const client = await redis.admin()
  const [key] = await client.keys('*:nodes')
  if (key === undefined) throw new Error('no node registry in Redis')
  const type = await client.type(key)
  if (type === 'zset') return client.zrange(key, 0, -1)
  if (type === 'hash') return client.hkeys(key)
  if (type === 'set') return client.smembers(key)
  throw new Error(`the node registry ${key} is a ${type}`)
}

t.test('the console in Chromium against two nodes over PostgreSQL and Redis', { skip: missing('chromium') }, async (t) => {
  const databaseUrl = await freshPostgresDatabase(t)
  const redis = await startRedis()
  t.teardown(() => redis.stop())
  const env = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url }
  const first = await startGatewayProcess(env, { name: 'node-a', teardown: (stop) => t.teardown(stop) })
  const second = await startGatewayProcess(env, { name: 'node-b', teardown: (stop) => t.teardown(stop) })
  const [a, b] = [first.url, second.url]

  // A tenant and a user with a live token, made through the admin API.
  const tenant = await setupCompany(a, 'Northwind Chat')
  const issued = await call(a, 'POST', '/rest/v1/auth/token', { keyId: tenant.keyId, keySecret: tenant.keySecret, userId: 'alice@northwind.example' })
  t.equal(issued.status, 200)
  const { token: aliceToken, user: alice } = issued.body as { token: string; user: { id: string } }
  for (const base of [a, b]) t.equal((await verify(base, aliceToken)).status, 200, `the token is valid on ${base}`)
  const nodeIds = new Set(await registeredNodes(redis))
  t.equal(nodeIds.size, 2, 'both nodes are registered on the bus')

  await t.test('the page is served with the CSP, and its assets from the node alone', async (t) => {
    for (const path of ['/console/', '/console/users/some-deep-link']) {
      const page = await fetch(a + path)
      t.equal(page.status, 200, `${path}: index.html`)
      const policy = page.headers.get('content-security-policy') ?? ''
      t.match(policy, /default-src 'self'/, `${path}: default-src 'self'`)
      t.match(policy, /frame-ancestors 'none'/, `${path}: frame-ancestors 'none'`)
      t.notMatch(policy, /unsafe-inline|unsafe-eval/, `${path}: nothing that loosens it`)
      const html = await page.text()
      t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script')
      t.notMatch(html, /<style|style=/, 'no inline style')
    }
  })

  const browser = await launch(t)
  const context = await newContext(browser)
  const page = await context.newPage()
  const tokens: { viewer?: string; operator?: string } = {}

  await t.test('the admin signs in by keyboard; the nodes page lists the nodes; the token is in no readable storage', async (t) => {
    await signInByKeyboard(page, a, ADMIN_TOKEN)
    t.match(page.url(), /\/console\/nodes$/, 'back on the screen the link named')
    await page.locator('table.nodes tbody tr').first().waitFor()
    const listed = (await admin(a, 'GET', '/admin/v1/nodes')).body.nodes.map((n: { nodeId: string }) => n.nodeId)
    t.ok(listed.length > 0, 'the API lists nodes')
    for (const nodeId of listed) {
      t.equal(await page.locator(`table.nodes tr[data-node="${nodeId}"]`).count(), 1, `node ${nodeId} is listed`)
    }
    const stored = await readableStorage(page)
    t.notMatch(stored, ADMIN_TOKEN, 'the admin token is in no storage the page can read')
    t.match(stored, '"cookie":""', 'document.cookie is empty: the session cookie is HttpOnly')
    await screenshot(page, 'console-nodes.png')
  })

  await t.test('the admin creates a viewer and an operator; each token is shown once', async (t) => {
    await page.getByRole('link', { name: 'Operators' }).click()
    for (const [name, role] of [
      ['Vera Viewer', 'viewer'],
      ['Otto Operator', 'operator'],
    ] as const) {
      await page.fill('#operator-name', name)
      await page.selectOption('#operator-role', role)
      await page.getByRole('button', { name: 'Create the operator' }).click()
      const secret = page.locator('[data-secret]')
      await secret.waitFor()
      tokens[role] = (await secret.textContent())!
      t.match(tokens[role], /^opt_[A-Za-z0-9_-]{43}$/, `${role}: its token`)
      await page.getByRole('button', { name: 'I have stored it' }).click()
      await page.locator('tbody tr', { hasText: name }).waitFor()
    }
    const listed = await admin(a, 'GET', '/admin/v1/operators')
    t.same(listed.body.map((o: { name: string; role: string }) => [o.name, o.role]).sort(), [['Otto Operator', 'operator'], ['Vera Viewer', 'viewer']])
  })

  await t.test('sign-out ends the session on both nodes', async (t) => {
    const cookie = await sessionCookie(context, a)
    for (const base of [a, b]) t.equal((await call(base, 'GET', '/admin/v1/nodes', undefined, { cookie })).status, 200, `the session works on ${base}`)
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForURL(/\/console\/sign-in/)
    for (const base of [a, b]) {
      t.equal((await call(base, 'GET', '/admin/v1/nodes', undefined, { cookie })).status, 401, `the ended session is refused on ${base}`)
      t.equal((await call(base, 'GET', '/console/api/session', undefined, { cookie })).status, 401, `no session on ${base}`)
    }
    t.equal(await page.evaluate(() => fetch('/admin/v1/nodes').then((r) => r.status)), 401, 'the page\'s next API call is 401')
  })

  await t.test('the operator finds the user by external id and revokes every token by keyboard; the receipt lists both nodes; both refuse the old token', async (t) => {
    await signInByKeyboard(page, a, tokens.operator!, '/console/users')
    await tabTo(page, '#companyId')
    await page.keyboard.type(tenant.companyId)
    await tabTo(page, '#externalId')
    await page.keyboard.type('alice@northwind.example')
    await page.keyboard.press('Enter')
    await page.waitForURL(new RegExp(`/console/users/${alice.id}$`))
    await page.locator('[data-field="tokenVersion"]').waitFor()
    t.equal(await page.locator('[data-field="tokenVersion"]').textContent(), '0')
    await tabTo(page, 'button', 'Revoke all tokens')
    await page.keyboard.press('Enter')
    const receipt = page.locator('.receipt')
    await receipt.waitFor()
    const listedNodes = await receipt.locator('tbody tr').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-node')))
    t.same(new Set(listedNodes), nodeIds, 'the receipt lists both nodes')
    t.equal(listedNodes.length, 2)
    t.notMatch(await receipt.textContent(), 'not acknowledged', 'each acknowledged')
    for (const base of [a, b]) {
      const refused = await verify(base, aliceToken)
      t.same([refused.status, refused.body.code], [401, 'TOKEN_REVOKED'], `the old token is refused by ${base}`)
    }
    await page.locator('[data-field="tokenVersion"]', { hasText: '1' }).waitFor()
    t.notMatch(await readableStorage(page), tokens.operator!, 'the operator token is in no storage the page can read')
    await screenshot(page, 'console-user.png')
  })

  await t.test('the company page: a company-wide revocation asks first, with the preview\'s numbers', async (t) => {
    await page.goto(`${a}/console/companies/${tenant.companyId}`)
    await page.locator('h2#agents').waitFor()
    await page.locator('tr[data-event="tokens.invalidated"]').first().waitFor()
    await page.locator('section[aria-labelledby="api-keys"] tbody tr').first().waitFor()
    await screenshot(page, 'console-company.png')
    const preview = (await admin(a, 'GET', `/admin/v1/companies/${tenant.companyId}/revoke-tokens/preview`)).body as { users: number; openSessions: number }
    await page.getByRole('button', { name: 'Revoke every token of the company…' }).click()
    const dialog = page.locator('dialog.confirm[open]')
    await dialog.waitFor()
    const text = (await dialog.locator('[data-preview]').textContent())!
    t.match(text, `of ${preview.users} active`, 'the preview\'s users')
    t.match(text, `ends ${preview.openSessions} open`, 'and open sessions')
    await page.keyboard.press('Escape')
    await dialog.waitFor({ state: 'detached' }).catch(() => dialog.waitFor({ state: 'hidden' }))
    const events = (await admin(a, 'GET', `/admin/v1/companies/${tenant.companyId}/events`)).body.events as { type: string }[]
    t.notOk(events.some((e) => e.type === 'company.tokens_revoked'), 'cancelled: nothing revoked')
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForURL(/\/console\/sign-in/)
  })

  await t.test('the viewer sees no write action anywhere, and the API answers a direct write 403', async (t) => {
    await signInByKeyboard(page, b, tokens.viewer!)
    for (const path of ['/console/nodes', `/console/users/${alice.id}`, `/console/companies/${tenant.companyId}`, '/console/companies', '/console/users', '/console/operators']) {
      await page.goto(b + path)
      await page.locator('main h1').first().waitFor()
      await page.waitForFunction(() => !document.body.textContent?.includes('Loading…'))
      const labels = await page.locator('button, input[type=submit]').evaluateAll((buttons) => buttons.map((b) => b.textContent?.trim() ?? ''))
      t.same(labels.filter((label) => WRITE_LABEL.test(label)), [], `${path}: no write action`)
    }
    t.equal(await page.getByRole('link', { name: 'Operators' }).count(), 0, 'no Operators screen in the menu')
    const direct = await page.evaluate(async (userId) => {
      const { csrf } = (await (await fetch('/console/api/session')).json()) as { csrf: string }
      const answer = await fetch(`/admin/v1/customer-users/${userId}/invalidate`, { method: 'POST', headers: { 'x-csrf-token': csrf } })
      return { status: answer.status, body: await answer.json() }
    }, alice.id)
    t.same(direct, { status: 403, body: FORBIDDEN }, 'the exact §10.1 body')
    t.equal((await admin(b, 'GET', `/admin/v1/customer-users/${alice.id}`)).body.tokenVersion, 1, 'nothing changed')
  })

  await t.test('the CSP holds: the app raised no violation, and an inline script injected into the page does not run', async (t) => {
    t.same(await violations(page), [], 'the console itself breaks no rule')
    const ran = await page.evaluate(async () => {
      const script = document.createElement('script')
      script.textContent = '(globalThis).inlineRan = true'
      document.head.append(script)
      await new Promise((resolve) => setTimeout(resolve, 100))
      return (globalThis as unknown as { inlineRan?: boolean }).inlineRan === true
    })
    t.equal(ran, false, 'the inline script did not run')
    t.match(await violations(page), [/^script-src/], 'and the browser reported the violation')
  })
})
