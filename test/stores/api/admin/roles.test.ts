/**
 * SPEC §10.1, roles enforced by the API from one table (src/routes/admin/roles.ts): every
 * route of the admin API is in it (a new one without a role fails here), and each route,
 * called by each role below the one it needs, is a 403 with the exact body and changes
 * nothing; called with the role it needs, it does what it does.
 */
import { Writable } from 'node:stream'
import Fastify, { type RouteOptions } from 'fastify'
import t from 'tap'
import app, { fastifyOptions } from '../../../../src/app.js'
import { loadConfig } from '../../../../src/config.js'
import { gatewayPlugin } from '../../../../src/gateway.js'
import { createLogger } from '../../../../src/logger.js'
import { ROUTE_ROLES, roleNeeded, enforceRoles } from '../../../../src/routes/admin/roles.js'
import { resolveAdminCallers } from '../../../../src/http/admin-callers.js'
import { installErrorHandling } from '../../../../src/http/error-handler.js'
import { ADMIN_CALLER } from '../../../../src/domain.js'
import { ADMIN_TOKEN, createTenant, errorBody, issueToken, randomUUID, sharedDb, snapshotRows, startApp, type TestApp } from '../../../support/helpers.js'

const FORBIDDEN = errorBody(403, 'Insufficient role', 'FORBIDDEN')
const ROLES = ['viewer', 'operator', 'admin'] as const
type Role = (typeof ROLES)[number]

/** Every route the app registers, as it is added (the app exactly as buildApp assembles it). */
async function registeredRoutes(): Promise<RouteOptions[]> {
  const db = await sharedDb(t)
  const config = loadConfig({ ADMIN_TOKEN, LOG_LEVEL: 'silent', SEED_DEMO: 'false', DATA_DIR: 'memory://' })
  const fastify = Fastify(fastifyOptions(config, createLogger(config, new Writable({ write: (_c, _e, done) => done() }))))
  const routes: RouteOptions[] = []
  fastify.addHook('onRoute', (route) => void routes.push(route))
  t.teardown(() => fastify.close())
  await fastify.register(gatewayPlugin, { config, db, logger: fastify.log as never })
  await fastify.register(app)
  await fastify.ready()
  return routes
}

const routes = await registeredRoutes()

// ── each route, each role ─────────────────────────────────────────────────
const node = await startApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', MAX_LIVE_TOKEN_REVOCATIONS: '1000' })
const acme = await createTenant(node, 'Roles Co')
const tokens: Record<Role, string> = {} as Record<Role, string>
for (const role of ROLES) tokens[role] = (await node.admin('POST', '/admin/v1/operators', { name: `the ${role}`, role })).json().token

/** What to send to each route of the table: a factory, so that each call has targets of its own. */
type Call = { url: string; payload?: unknown }
async function freshUser(): Promise<{ id: string; token: string }> {
  const issued = await issueToken(node, acme, `u-${randomUUID()}`)
  return { id: issued.user.id, token: issued.token }
}
async function freshCompany(): Promise<string> {
  return (await node.admin('POST', '/admin/v1/companies', { name: `c-${randomUUID()}` })).json().id
}
async function freshAgent(): Promise<string> {
  return (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: `a-${randomUUID()}` })).json().id
}
const webhook = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/webhooks`, { url: 'http://127.0.0.1:9/hook' })).json()
await node.admin('POST', `/admin/v1/customer-users/${(await freshUser()).id}/invalidate`)
const delivery = (await node.admin('GET', `/admin/v1/webhooks/${webhook.id}/deliveries`)).json()[0]

const CALLS: Record<string, () => Promise<Call>> = {
  'GET /admin/v1/companies': async () => ({ url: '/admin/v1/companies?query=roles' }),
  'GET /admin/v1/companies/:companyId': async () => ({ url: `/admin/v1/companies/${acme.companyId}` }),
  'GET /admin/v1/companies/:companyId/usage': async () => ({ url: `/admin/v1/companies/${acme.companyId}/usage` }),
  'GET /admin/v1/companies/:companyId/agents': async () => ({ url: `/admin/v1/companies/${acme.companyId}/agents` }),
  'GET /admin/v1/companies/:companyId/api-keys': async () => ({ url: `/admin/v1/companies/${acme.companyId}/api-keys` }),
  'GET /admin/v1/companies/:companyId/events': async () => ({ url: `/admin/v1/companies/${acme.companyId}/events` }),
  'GET /admin/v1/companies/:companyId/webhooks': async () => ({ url: `/admin/v1/companies/${acme.companyId}/webhooks` }),
  'GET /admin/v1/companies/:companyId/revoke-tokens/preview': async () => ({ url: `/admin/v1/companies/${acme.companyId}/revoke-tokens/preview` }),
  'GET /admin/v1/agents/:agentId/revoke-tokens/preview': async () => ({ url: `/admin/v1/agents/${acme.agentId}/revoke-tokens/preview` }),
  'GET /admin/v1/customer-users': async () => ({ url: `/admin/v1/customer-users?companyId=${acme.companyId}&externalId=${encodeURIComponent((await node.admin('GET', `/admin/v1/customer-users/${(await freshUser()).id}`)).json().externalId)}` }),
  'GET /admin/v1/customer-users/:customerUserId': async () => ({ url: `/admin/v1/customer-users/${(await freshUser()).id}` }),
  'GET /admin/v1/webhooks/:webhookId/deliveries': async () => ({ url: `/admin/v1/webhooks/${webhook.id}/deliveries` }),
  'GET /admin/v1/nodes': async () => ({ url: '/admin/v1/nodes' }),
  'POST /admin/v1/customer-users/:customerUserId/invalidate': async () => ({ url: `/admin/v1/customer-users/${(await freshUser()).id}/invalidate` }),
  'POST /admin/v1/tokens/revoke': async () => ({ url: '/admin/v1/tokens/revoke', payload: { token: (await freshUser()).token } }),
  'POST /admin/v1/companies/:companyId/revoke-tokens': async () => ({ url: `/admin/v1/companies/${await freshCompany()}/revoke-tokens` }),
  'POST /admin/v1/agents/:agentId/revoke-tokens': async () => ({ url: `/admin/v1/agents/${await freshAgent()}/revoke-tokens` }),
  'PATCH /admin/v1/customer-users/:customerUserId': async () => ({ url: `/admin/v1/customer-users/${(await freshUser()).id}`, payload: { active: false } }),
  'PATCH /admin/v1/agents/:agentId': async () => ({ url: `/admin/v1/agents/${await freshAgent()}`, payload: { active: false } }),
  'POST /admin/v1/webhook-deliveries/:deliveryId/redeliver': async () => ({ url: `/admin/v1/webhook-deliveries/${delivery.deliveryId}/redeliver` }),
  'POST /admin/v1/companies': async () => ({ url: '/admin/v1/companies', payload: { name: 'New Co' } }),
  'PATCH /admin/v1/companies/:companyId': async () => ({ url: `/admin/v1/companies/${await freshCompany()}`, payload: { name: 'Renamed' } }),
  'POST /admin/v1/companies/:companyId/agents': async () => ({ url: `/admin/v1/companies/${acme.companyId}/agents`, payload: { name: 'another' } }),
  'POST /admin/v1/companies/:companyId/api-keys': async () => ({ url: `/admin/v1/companies/${acme.companyId}/api-keys`, payload: { name: 'another' } }),
  'DELETE /admin/v1/api-keys/:keyId': async () => ({ url: `/admin/v1/api-keys/${(await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, {})).json().keyId}` }),
  'POST /admin/v1/companies/:companyId/webhooks': async () => ({ url: `/admin/v1/companies/${acme.companyId}/webhooks`, payload: { url: 'http://127.0.0.1:9/other' } }),
  'DELETE /admin/v1/webhooks/:webhookId': async () => ({
    url: `/admin/v1/webhooks/${(await node.admin('POST', `/admin/v1/companies/${await freshCompany()}/webhooks`, { url: 'http://127.0.0.1:9/x' })).json().id}`,
  }),
  'POST /admin/v1/operators': async () => ({ url: '/admin/v1/operators', payload: { name: 'made', role: 'viewer' } }),
  'GET /admin/v1/operators': async () => ({ url: '/admin/v1/operators' }),
  'DELETE /admin/v1/operators/:operatorId': async () => ({ url: `/admin/v1/operators/${(await node.admin('POST', '/admin/v1/operators', { name: 'target', role: 'viewer' })).json().id}` }),
}

t.test('every admin route the app registers has a role in the table, and every entry is a route', async (t) => {
  const admin = routes
    .filter((r) => r.url.startsWith('/admin/v1/'))
    .flatMap((r) => ([] as string[]).concat(r.method).map((m) => `${m} ${r.url}`))
    // Fastify answers HEAD with the GET route (roles.ts: a HEAD needs what its GET needs)
    .filter((key) => !key.startsWith('HEAD '))
  t.ok(admin.length >= 29, `the route log saw the admin routes (${admin.length})`)
  t.same(admin.filter((key) => !(key in ROUTE_ROLES)), [], 'no admin route without a role')
  t.same(Object.keys(ROUTE_ROLES).filter((key) => !admin.includes(key)), [], 'no role for a route that is not there')
})

t.test('a route missing from the table is refused to every caller, ADMIN_TOKEN too', async (t) => {
  t.equal(roleNeeded('POST', '/admin/v1/something-new', {}), undefined)
  const fastify = Fastify()
  installErrorHandling(fastify)
  await fastify.register(
    async (admin) => {
      await resolveAdminCallers(admin, { credentials: { admin: async () => ADMIN_CALLER }, consoleSessions: undefined, noteUsed: () => {} })
      enforceRoles(admin)
      admin.get('/something-new', async () => ({ ok: true }))
    },
    { prefix: '/admin/v1' },
  )
  const answer = await fastify.inject({ method: 'GET', url: '/admin/v1/something-new' })
  t.equal(answer.statusCode, 403)
  t.strictSame(answer.json(), FORBIDDEN)
})

const call = (role: Role, key: string, { url, payload }: Call) =>
  node.inject({ method: key.split(' ')[0] as 'GET', url, headers: { authorization: `Bearer ${tokens[role]}` }, ...(payload === undefined ? {} : { payload: payload as object }) })

t.test('every route of the table has a call here (a new route needs one)', async (t) => {
  t.same(Object.keys(ROUTE_ROLES).filter((key) => !(key in CALLS)), [])
})

t.test('below the role it needs, each route is a 403 with the exact body, and nothing changes', async (t) => {
  const refusals: Array<{ role: Role; key: string; call: Call }> = []
  for (const key of Object.keys(ROUTE_ROLES)) {
    const needed = roleNeeded(key.split(' ')[0]!, key.slice(key.indexOf(' ') + 1), (await CALLS[key]!()).payload)!
    for (const role of ROLES.slice(0, ROLES.indexOf(needed))) refusals.push({ role, key, call: await CALLS[key]!() })
  }
  t.ok(refusals.length > 25, `${refusals.length} refusals to check`)
  const before = await snapshotRows(node)
  for (const { role, key, call: request } of refusals) {
    const answer = await call(role, key, request)
    t.equal(answer.statusCode, 403, `${role}: ${key}`)
    t.strictSame(answer.json(), FORBIDDEN, `${role}: ${key}`)
  }
  t.equal(await snapshotRows(node), before, 'no row and no event changed')
})

t.test('with the role it needs, each route does its job', async (t) => {
  for (const key of Object.keys(ROUTE_ROLES)) {
    const request = await CALLS[key]!()
    const needed = roleNeeded(key.split(' ')[0]!, key.slice(key.indexOf(' ') + 1), request.payload)!
    const answer = await call(needed, key, request)
    t.ok(answer.statusCode >= 200 && answer.statusCode < 300, `${needed}: ${key} answered ${answer.statusCode} ${answer.statusCode >= 300 ? answer.body : ''}`)
  }
})

t.test('an operator (de)activates an agent, but renaming it needs an admin', async (t) => {
  const agentId = await freshAgent()
  const renamed = await call('operator', 'PATCH', { url: `/admin/v1/agents/${agentId}`, payload: { name: 'new name', active: false } })
  t.equal(renamed.statusCode, 403)
  t.strictSame(renamed.json(), FORBIDDEN)
  t.equal((await node.admin('GET', `/admin/v1/agents/${agentId}/revoke-tokens/preview`)).statusCode, 200)
  const deactivated = await call('operator', 'PATCH', { url: `/admin/v1/agents/${agentId}`, payload: { active: false } })
  t.equal(deactivated.statusCode, 200)
  t.equal(deactivated.json().active, false)
  t.equal(deactivated.json().name.startsWith('a-'), true, 'the name is untouched')
  t.equal((await call('admin', 'PATCH', { url: `/admin/v1/agents/${agentId}`, payload: { name: 'new name' } })).json().name, 'new name')
})

t.test('HEAD needs what GET needs; an unknown path is still a 404 to any known caller', async (t) => {
  const head = await node.inject({ method: 'HEAD', url: '/admin/v1/operators', headers: { authorization: `Bearer ${tokens.viewer}` } })
  t.equal(head.statusCode, 403)
  const unknown = await node.inject({ method: 'GET', url: '/admin/v1/no-such-thing', headers: { authorization: `Bearer ${tokens.viewer}` } })
  t.equal(unknown.statusCode, 404)
  t.strictSame(unknown.json(), errorBody(404, 'Route GET /admin/v1/no-such-thing not found', 'ROUTE_NOT_FOUND'))
})

export type { TestApp }
