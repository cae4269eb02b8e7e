/**
 * The typed client's calls of SPEC §10 against a listening gateway: operators, the calls the
 * console needs, an operator's token as `adminToken`, and a console session (a cookie the
 * fetch keeps, as a browser does, and the `csrf` option): no Authorization, the anti-CSRF
 * token on writes only, `credentials` handed to fetch.
 */
import t from 'tap'
import { ChatAuthClient, ChatAuthError } from '../../../../src/client/index.js'
import { ADMIN_TOKEN, ISO_RE, UUID_RE } from '../../../support/helpers.js'
import { startApp } from '../../../support/helpers.js'

const node = await startApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
const baseUrl = await node.app.listen({ port: 0, host: '127.0.0.1' })
const admin = new ChatAuthClient({ baseUrl, adminToken: ADMIN_TOKEN }).admin

async function failure(promise: Promise<unknown>): Promise<ChatAuthError> {
  const error = await promise.then(
    () => undefined,
    (error: unknown) => error,
  )
  if (!(error instanceof ChatAuthError)) throw new Error(`expected a ChatAuthError, got ${String(error)}`)
  return error
}

const company = await admin.createCompany({ name: 'Client Console Co' })
const agent = await admin.createAgent(company.id, { name: 'bot' })
const key = await admin.createApiKey(company.id, {})
const tenant = new ChatAuthClient({ baseUrl, apiKey: { keyId: key.keyId, keySecret: key.keySecret } })

t.test('operators: create (token shown once), list, revoke; the token works as adminToken until revoked', async (t) => {
  const created = await admin.createOperator({ name: 'Client Op', role: 'viewer' })
  t.match(created, { id: UUID_RE, name: 'Client Op', role: 'viewer', token: /^opt_/, createdAt: ISO_RE })
  t.match((await admin.listOperators()).find((o) => o.id === created.id), { name: 'Client Op', revokedAt: null })
  const asViewer = new ChatAuthClient({ baseUrl, adminToken: created.token }).admin
  t.equal((await asViewer.getCompany(company.id)).id, company.id)
  const forbidden = await failure(asViewer.revokeCompanyTokens(company.id))
  t.match(forbidden, { statusCode: 403, code: 'FORBIDDEN', message: 'Insufficient role' })
  t.match(await admin.revokeOperator(created.id), { id: created.id, revokedAt: ISO_RE })
  t.match(await failure(asViewer.getCompany(company.id)), { statusCode: 401, code: 'INVALID_ADMIN_TOKEN' })
})

t.test('the calls the console needs', async (t) => {
  const issued = await tenant.issueToken({ userId: 'client-user' })
  t.strictSame(await admin.findCustomerUser(company.id, 'client-user'), await admin.getCustomerUser(issued.user.id))
  t.match(await admin.previewCompanyRevocation(company.id), { users: 1, openSessions: 0 })
  t.match(await admin.previewAgentRevocation(agent.id), { users: 1, openSessions: 0 })
  const invalidated = await admin.invalidateUser(issued.user.id)
  t.match(invalidated, { customerUserId: issued.user.id, newTokenVersion: 1, receipt: { outcome: 'embedded' } })
  const second = await tenant.issueToken({ userId: 'client-user' })
  t.match(await admin.revokeToken(second.token), { message: 'Token revoked successfully', receipt: { outcome: 'embedded' } })
  t.match(await admin.revokeToken(second.token), { receipt: null }, 'retried or repeated: harmless')
  const page = await admin.searchCompanies({ query: 'client console', limit: 1 })
  t.strictSame(page.companies.map((c) => c.id), [company.id])
  const { nodes } = await admin.listNodes()
  t.equal(nodes.length, 1)
  const webhook = await admin.createWebhook(company.id, { url: 'http://127.0.0.1:9/hook' })
  await admin.invalidateUser(issued.user.id)
  const [delivery] = await admin.listWebhookDeliveries(webhook.id)
  t.match(await admin.redeliver(delivery!.deliveryId), { webhookId: webhook.id, eventId: delivery!.eventId, status: 'pending' })
  t.match(await failure(admin.findCustomerUser(company.id, 'nobody')), { statusCode: 404, code: 'NOT_FOUND' })
  t.match(await failure(admin.findCustomerUser(company.id, 42 as unknown as string)), { code: 'INVALID_ARGUMENT' })
})

t.test('a console session: the cookie (kept by the fetch, as a browser keeps it) and csrf; no bearer', async (t) => {
  const operator = await admin.createOperator({ name: 'Browser Op', role: 'operator' })
  const seen: Array<{ method: string; path: string; authorization: string | null; csrf: string | null; credentials: RequestCredentials | undefined }> = []
  let cookie: string | undefined
  const browserFetch: typeof fetch = async (input, init) => {
    const headers = new Headers(init?.headers)
    if (cookie !== undefined) headers.set('cookie', cookie)
    const url = new URL(String(input))
    seen.push({ method: init?.method ?? 'GET', path: url.pathname, authorization: headers.get('authorization'), csrf: headers.get('x-csrf-token'), credentials: init?.credentials })
    const response = await fetch(input, { ...init, headers })
    const set = response.headers.get('set-cookie')
    if (set !== null) cookie = /Max-Age=0/.test(set) ? undefined : set.split(';')[0]
    return response
  }
  const signedOut = new ChatAuthClient({ baseUrl, fetch: browserFetch, credentials: 'same-origin' })
  const session = await signedOut.console.signIn(operator.token)
  t.match(session, { role: 'operator', name: 'Browser Op', csrf: /^[A-Za-z0-9_-]{43}$/ })
  const page = new ChatAuthClient({ baseUrl, fetch: browserFetch, credentials: 'same-origin', csrf: session.csrf })
  t.strictSame(await page.console.session(), session)
  const issued = await tenant.issueToken({ userId: 'browser-user' })
  t.equal((await page.admin.getCustomerUser(issued.user.id)).id, issued.user.id)
  t.equal((await page.admin.invalidateUser(issued.user.id)).newTokenVersion, 1)
  t.match(await failure(page.admin.createCompany({ name: 'not mine' })), { statusCode: 403, code: 'FORBIDDEN' })
  await page.console.signOut()
  t.match(await failure(page.admin.getCustomerUser(issued.user.id)), { statusCode: 401, code: 'INVALID_ADMIN_TOKEN' })
  t.ok(seen.every((call) => call.authorization === null), 'no Authorization, ever')
  t.ok(seen.every((call) => call.credentials === 'same-origin'), 'credentials handed to fetch')
  t.strictSame(
    seen.filter((call) => call.path !== '/console/api/session' || call.method !== 'POST').map((call) => [call.method, call.csrf === session.csrf]),
    [
      ['GET', false],
      ['GET', false],
      ['POST', true],
      ['POST', true],
      ['DELETE', true],
      ['GET', false],
    ],
    'the anti-CSRF token on writes only',
  )
  t.throws(() => new ChatAuthClient({ baseUrl, credentials: 'sometimes' as 'include' }), /client option credentials/)
})
