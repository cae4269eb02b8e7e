/**
 * The API description (GET /openapi.json): a valid OpenAPI 3.1 document, generated from the
 * routes themselves, that names every route the app registers, every SPEC path with its
 * request body, answers and error bodies, and the admin paths' bearer scheme.
 */
import { connect, type AddressInfo } from 'node:net'
import { Writable } from 'node:stream'
import Fastify, { type RouteOptions } from 'fastify'
import { Validator } from '@seriousme/openapi-schema-validator'
import t, { type Test } from 'tap'
import app, { fastifyOptions } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { gatewayPlugin } from '../../../src/gateway.js'
import { createLogger } from '../../../src/logger.js'
import { DOCS_PATH, OPENAPI_PATH } from '../../../src/http/openapi.js'
import { VERIFY_PATH } from '../../../src/routes/verify/path.js'
import { createPostgresDb } from '../../../src/store/db.js'
import { ADMIN_TOKEN, freshPostgresDatabase, JWT_SECRET, sharedDb, STORE } from '../../support/helpers.js'

interface Operation {
  summary?: string
  description?: string
  tags?: string[]
  security?: Array<Record<string, string[]>>
  requestBody?: { required?: boolean; content: Record<string, { schema: { type?: string; properties?: Record<string, unknown> } }> }
  responses: Record<string, { description: string; content?: Record<string, { schema: { properties?: Record<string, unknown>; required?: string[] } }> }>
}
interface Document {
  openapi: string
  paths: Record<string, Record<string, Operation>>
  components: { securitySchemes: Record<string, { type: string; scheme: string }> }
}

/** The app as buildApp assembles it, with every route it registers recorded as it is added. */
async function appWithRouteLog(t: Test) {
  const url = STORE === 'postgres' ? await freshPostgresDatabase(t) : undefined
  const db = url === undefined ? await sharedDb(t) : createPostgresDb(url)
  if (url !== undefined) t.teardown(() => db.close())
  const config = loadConfig({ ADMIN_TOKEN, JWT_SECRET, LOG_LEVEL: 'silent', SEED_DEMO: 'false', ...(url === undefined ? { DATA_DIR: 'memory://' } : { DATABASE_URL: url }) })
  const logger = createLogger(config, new Writable({ write: (_chunk, _enc, done) => done() }))
  const fastify = Fastify(fastifyOptions(config, logger))
  const routes: RouteOptions[] = []
  fastify.addHook('onRoute', (route) => void routes.push(route))
  t.teardown(() => fastify.close())
  await fastify.register(gatewayPlugin, { config, db, logger })
  await fastify.register(app)
  await fastify.ready()
  return { fastify, routes }
}

const { fastify, routes } = await appWithRouteLog(t)
const answer = await fastify.inject({ method: 'GET', url: OPENAPI_PATH })
const document = answer.json() as Document
const openApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}')
const operation = (method: string, url: string) => document.paths[openApiPath(url)]?.[method.toLowerCase()]

t.test('GET /openapi.json is a valid OpenAPI 3.1 document', async (t) => {
  t.equal(answer.statusCode, 200)
  t.match(answer.headers['content-type'], /^application\/json/)
  t.match(document.openapi, /^3\.1\./)
  const validator = new Validator()
  const result = await validator.validate(structuredClone(document) as unknown as Record<string, unknown>)
  t.equal(validator.version, '3.1')
  t.same(result.errors ?? [], [], 'no validation errors')
  t.ok(result.valid)
})

t.test('the validator finds a broken document (so that the test above can fail)', async (t) => {
  const broken = structuredClone(document) as unknown as Record<string, Record<string, Record<string, unknown>>>
  broken.paths!['/rest/v1/auth/token']!.post = { responses: 'none' }
  t.notOk((await new Validator().validate(broken)).valid)
})

t.test('every route the app registers is in the document', async (t) => {
  t.ok(routes.length > 15, 'the route log saw the routes')
  const missing: string[] = []
  for (const route of routes) {
    const methods = ([] as string[]).concat(route.method)
    const url = route.url
    const hidden = (route.schema as { hide?: boolean } | undefined)?.hide === true
    if (url === OPENAPI_PATH || url === DOCS_PATH || url.startsWith(DOCS_PATH + '/')) {
      t.ok(hidden, `${url}: the description's own routes are left out of it`)
      continue
    }
    // The console's page and assets are a page, not API (its session API is documented).
    if (url === '/console' || (url.startsWith('/console/') && !url.startsWith('/console/api/'))) {
      t.ok(hidden, `${url}: the console's page is left out`)
      continue
    }
    for (const method of methods) {
      // The verify endpoint answers every method, at every path below it, alike: its GET entry documents them all.
      if (url.startsWith(VERIFY_PATH) && !(url === VERIFY_PATH && method === 'GET')) {
        t.ok(hidden && operation('GET', VERIFY_PATH) !== undefined, `${method} ${url} is documented by GET ${VERIFY_PATH}`)
        continue
      }
      // Fastify adds a HEAD route for each GET by itself; the GET documents it.
      if (method === 'HEAD' && methods.length === 1 && routes.some((r) => r.url === url && ([] as string[]).concat(r.method).includes('GET'))) continue
      if (operation(method, url) === undefined) missing.push(`${method} ${url}`)
    }
  }
  t.same(missing, [], 'no registered route is missing')
  t.ok(routes.some((r) => r.url.startsWith(DOCS_PATH)), 'the reference page is registered')
})

t.test('the verify endpoint is listed once, as GET, saying that every method is accepted', async (t) => {
  t.same(Object.keys(document.paths).filter((path) => path.startsWith(VERIFY_PATH)), [VERIFY_PATH], 'no path below it is listed')
  t.same(Object.keys(document.paths[VERIFY_PATH] ?? {}), ['get'], 'one method')
  t.match(operation('GET', VERIFY_PATH)?.description, /every method is accepted/)
  const methods = new Set(routes.filter((r) => r.url === VERIFY_PATH).flatMap((r) => ([] as string[]).concat(r.method)))
  t.ok(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'PROPFIND', 'QUERY'].every((m) => methods.has(m)), 'while the app still routes every method to it')
})

t.test('every documented operation is a route of the app', async (t) => {
  const registered = new Set(routes.flatMap((r) => ([] as string[]).concat(r.method).map((m) => `${m.toLowerCase()} ${openApiPath(r.url)}`)))
  const extra = Object.entries(document.paths).flatMap(([path, item]) => Object.keys(item).filter((m) => !registered.has(`${m} ${path}`)).map((m) => `${m} ${path}`))
  t.same(extra, [])
})

/** The SPEC's endpoints (§3, §4 and §7), each with what its entry must hold. */
const SPEC_ENDPOINTS: Array<{ method: string; url: string; body?: string[]; ok: number; errors: number[]; admin?: boolean }> = [
  { method: 'POST', url: '/rest/v1/auth/token', body: ['keyId', 'keySecret', 'userId', 'agentId', 'expiresIn'], ok: 200, errors: [400, 401, 403, 409, 429] },
  { method: 'POST', url: '/rest/v1/auth/invalidate-token', body: ['keyId', 'keySecret', 'customerUserId'], ok: 200, errors: [400, 401, 429] },
  { method: 'GET', url: '/rest/v1/auth/verify', ok: 200, errors: [401, 503] },
  { method: 'GET', url: '/healthz', ok: 200, errors: [] },
  { method: 'GET', url: '/readyz', ok: 200, errors: [] },
  { method: 'GET', url: '/metrics', ok: 200, errors: [] },
  { method: 'GET', url: '/.well-known/jwks.json', ok: 200, errors: [] },
  { method: 'POST', url: '/admin/v1/companies', body: ['name'], ok: 201, errors: [400, 401], admin: true },
  { method: 'GET', url: '/admin/v1/companies/:companyId', ok: 200, errors: [401, 404], admin: true },
  { method: 'PATCH', url: '/admin/v1/companies/:companyId', body: ['name', 'defaultAgentId'], ok: 200, errors: [400, 401, 404], admin: true },
  { method: 'POST', url: '/admin/v1/companies/:companyId/agents', body: ['name', 'active'], ok: 201, errors: [400, 401, 404], admin: true },
  { method: 'PATCH', url: '/admin/v1/agents/:agentId', body: ['name', 'active'], ok: 200, errors: [400, 401, 404], admin: true },
  { method: 'POST', url: '/admin/v1/companies/:companyId/api-keys', body: ['name'], ok: 201, errors: [400, 401, 404], admin: true },
  { method: 'GET', url: '/admin/v1/companies/:companyId/api-keys', ok: 200, errors: [401, 404], admin: true },
  { method: 'DELETE', url: '/admin/v1/api-keys/:keyId', ok: 200, errors: [401, 404], admin: true },
  { method: 'GET', url: '/admin/v1/customer-users/:customerUserId', ok: 200, errors: [401, 404], admin: true },
  { method: 'PATCH', url: '/admin/v1/customer-users/:customerUserId', body: ['active'], ok: 200, errors: [400, 401, 404], admin: true },
  { method: 'POST', url: '/rest/v1/auth/revoke-token', body: ['keyId', 'keySecret', 'token'], ok: 200, errors: [400, 401, 409, 429] },
  { method: 'POST', url: '/admin/v1/companies/:companyId/revoke-tokens', ok: 200, errors: [401, 404], admin: true },
  { method: 'POST', url: '/admin/v1/agents/:agentId/revoke-tokens', ok: 200, errors: [401, 404], admin: true },
  { method: 'GET', url: '/admin/v1/companies/:companyId/events', ok: 200, errors: [400, 401, 404], admin: true },
  { method: 'GET', url: '/admin/v1/companies/:companyId/usage', ok: 200, errors: [401, 404], admin: true },
  // SPEC §10
  { method: 'POST', url: '/admin/v1/operators', body: ['name', 'role'], ok: 201, errors: [400, 401, 403], admin: true },
  { method: 'GET', url: '/admin/v1/operators', ok: 200, errors: [401, 403], admin: true },
  { method: 'DELETE', url: '/admin/v1/operators/:operatorId', ok: 200, errors: [401, 403, 404], admin: true },
  { method: 'POST', url: '/admin/v1/customer-users/:customerUserId/invalidate', ok: 200, errors: [401, 403, 404, 503], admin: true },
  { method: 'POST', url: '/admin/v1/tokens/revoke', body: ['token'], ok: 200, errors: [400, 401, 403, 409, 503], admin: true },
  { method: 'GET', url: '/admin/v1/customer-users', ok: 200, errors: [400, 401, 403, 404], admin: true },
  { method: 'GET', url: '/admin/v1/companies', ok: 200, errors: [400, 401, 403], admin: true },
  { method: 'GET', url: '/admin/v1/nodes', ok: 200, errors: [401, 403], admin: true },
  { method: 'POST', url: '/admin/v1/webhook-deliveries/:deliveryId/redeliver', ok: 202, errors: [401, 403, 404], admin: true },
  { method: 'GET', url: '/admin/v1/companies/:companyId/revoke-tokens/preview', ok: 200, errors: [401, 403, 404], admin: true },
  { method: 'GET', url: '/admin/v1/agents/:agentId/revoke-tokens/preview', ok: 200, errors: [401, 403, 404], admin: true },
  { method: 'POST', url: '/console/api/session', body: ['token'], ok: 200, errors: [400, 401, 429] },
  { method: 'GET', url: '/console/api/session', ok: 200, errors: [401] },
]

t.test('each SPEC endpoint: request body, answer, error bodies, and the admin bearer scheme', async (t) => {
  t.same(document.components.securitySchemes.adminToken, { type: 'http', scheme: 'bearer', description: "The ADMIN_TOKEN of the deployment (role admin), or an operator's token (`opt_…`, with the operator's role)" })
  t.match(document.components.securitySchemes.consoleSession, { type: 'apiKey', in: 'cookie', name: 'chat_auth_console' })
  for (const endpoint of SPEC_ENDPOINTS) {
    const name = `${endpoint.method} ${endpoint.url}`
    const entry = operation(endpoint.method, endpoint.url)
    if (!t.ok(entry, `${name} is documented`) || entry === undefined) continue
    t.ok(entry.summary, `${name} has a summary`)
    if (endpoint.body) {
      const schema = entry.requestBody?.content['application/json']?.schema
      t.same(Object.keys(schema?.properties ?? {}).sort(), [...endpoint.body].sort(), `${name}: its request body's fields`)
    } else t.equal(entry.requestBody, undefined, `${name} takes no body`)
    t.ok(entry.responses[endpoint.ok]?.content, `${name}: its ${endpoint.ok} answer has a body`)
    t.not(entry.responses[endpoint.ok]?.description, 'Default Response', `${name}: its ${endpoint.ok} answer is described`)
    for (const status of endpoint.errors) {
      const error = entry.responses[status]?.content?.['application/json']?.schema
      t.same(error?.required, ['statusCode', 'message', 'code'], `${name}: ${status} answers the error body`)
      t.not(entry.responses[status]?.description, 'Default Response', `${name}: ${status} says what it means`)
    }
    if (endpoint.admin) {
      t.same(entry.security, [{ adminToken: [] }, { consoleSession: [] }], `${name} needs the admin token, an operator's, or a console session`)
      t.same(entry.responses[403]?.content?.['application/json']?.schema?.required, ['statusCode', 'message', 'code'], `${name}: 403 beyond the caller's role`)
    }
    else t.notOk(entry.security?.some((scheme) => 'adminToken' in scheme), `${name} does not ask for the admin token`)
  }
  t.same(operation('GET', '/rest/v1/auth/verify')?.security, [{ chatToken: [] }], 'verify takes the issued JWT as a bearer token')
  const events = operation('GET', '/admin/v1/companies/:companyId/events') as (Operation & { parameters?: Array<{ in: string; name: string }> }) | undefined
  t.same(events?.parameters?.filter((p) => p.in === 'query').map((p) => p.name).sort(), ['after', 'before', 'limit'], 'the events listing names its query parameters')
})

t.test('the description routes answer without credentials; the reference page is HTML', async (t) => {
  const page = await fastify.inject({ method: 'GET', url: DOCS_PATH })
  t.equal(page.statusCode, 200)
  t.match(page.headers['content-type'], /^text\/html/)
  t.notMatch(page.body, /https?:\/\/(?!127\.0\.0\.1|localhost)[^"'\s]*\.(js|css)/, 'no script or style from another host')
})

t.test('the page\'s own copies of the document: /docs/json is /openapi.json, /docs/yaml the same in YAML', async (t) => {
  const json = await fastify.inject({ method: 'GET', url: `${DOCS_PATH}/json` })
  t.equal(json.statusCode, 200)
  t.strictSame(json.json(), document)
  const yaml = await fastify.inject({ method: 'GET', url: `${DOCS_PATH}/yaml` })
  t.equal(yaml.statusCode, 200)
  t.match(yaml.headers['content-type'], /yaml/)
  t.match(yaml.body, /^openapi: 3\.1\.0$/m)
})

t.test('a path that climbs out of the page\'s files is a 404 with the error body, as any unknown path', async (t) => {
  // Over a real socket: inject would resolve the dots before the router sees them.
  await fastify.listen({ port: 0, host: '127.0.0.1' })
  const port = (fastify.server.address() as AddressInfo).port
  for (const path of ['/docs/static/..', '/docs/static/../', '/docs/static/%2e%2e', '/docs/static/.%2e/', '/docs/static/a/..', '/docs/static/%00', '/docs/static//etc/passwd']) {
    const response = await rawGet(port, path)
    t.equal(response.status, 404, path)
    t.strictSame(JSON.parse(response.body), { statusCode: 404, message: `Route GET ${path} not found`, code: 'ROUTE_NOT_FOUND' }, path)
  }
})

/** One GET written by hand, so that its path reaches the server exactly as written. */
function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('utf8')
    socket.on('data', (chunk: string) => (text += chunk))
    socket.on('error', reject)
    socket.on('end', () => resolve({ status: Number(text.split(' ')[1]), body: text.slice(text.indexOf('\r\n\r\n') + 4) }))
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
  })
}
