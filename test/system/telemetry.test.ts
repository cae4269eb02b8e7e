import { once } from 'node:events'
import { readFileSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { freshPostgresDatabase } from '../support/databases.js'
import { call, setupCompany } from '../support/http-client.js'
import { waitFor } from '../support/poll.js'
import { ROOT, startGatewayProcess, type GatewayProcess } from '../support/processes.js'
import { startRedis, type RedisServer } from '../support/services.js'

/**
 * OpenTelemetry, end to end: two real node processes over the real PostgreSQL and a Redis of
 * their own, one with the standard OTEL_* variables pointing at an OTLP/HTTP receiver (a
 * node:http server taking POST /v1/traces as JSON), the other with none. The traced node's
 * requests arrive as spans with their route and status, with their PostgreSQL queries and
 * Redis commands and the wait for the other node's acknowledgement inside the same trace;
 * the other node loads nothing of OpenTelemetry (test/support/loaded-modules.mjs lists what
 * each process loaded, ES modules and CommonJS alike).
 *
 * It runs once, in the PostgreSQL pass: it never uses the pass's store.
 */

interface OtlpValue {
  stringValue?: string
  intValue?: string | number
  boolValue?: boolean
}
interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes?: Array<{ key: string; value: OtlpValue }>
}
interface Span {
  traceId: string
  spanId: string
  parentSpanId: string | undefined
  name: string
  kind: number
  service: string | undefined
  scope: string
  attributes: Record<string, string | number | boolean | undefined>
}

const valueOf = (value: OtlpValue) => value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue))
const SPAN_KIND_SERVER = 2

/** An OTLP/HTTP receiver of traces in the JSON encoding, keeping every span it is sent. */
async function startReceiver(): Promise<{ url: string; spans: Span[]; paths: string[]; close(): Promise<void> }> {
  const spans: Span[] = []
  const paths: string[] = []
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      paths.push(`${request.method} ${request.url} ${request.headers['content-type']}`)
      if (request.method === 'POST' && request.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        for (const resource of body.resourceSpans ?? []) {
          const service = resource.resource?.attributes?.find((a: { key: string }) => a.key === 'service.name')?.value?.stringValue
          for (const scope of resource.scopeSpans ?? []) {
            for (const span of (scope.spans ?? []) as OtlpSpan[]) {
              spans.push({
                traceId: span.traceId,
                spanId: span.spanId,
                parentSpanId: span.parentSpanId || undefined,
                name: span.name,
                kind: span.kind,
                service,
                scope: scope.scope?.name ?? '',
                attributes: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, valueOf(a.value)])),
              })
            }
          }
        }
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const address = server.address() as { port: number }
  return { url: `http://127.0.0.1:${address.port}`, spans, paths, close: () => new Promise((resolve) => server.close(() => resolve())) }
}

/** Whether `span` is `ancestor` or lies under it, by the parent ids of `all`. */
function under(span: Span, ancestor: Span, all: Span[]): boolean {
  const byId = new Map(all.map((s) => [s.spanId, s]))
  for (let at: Span | undefined = span; at !== undefined; at = at.parentSpanId ? byId.get(at.parentSpanId) : undefined) if (at.spanId === ancestor.spanId) return true
  return false
}

const modulesFile = (name: string) => join(tmpdir(), `chat-auth-loaded-${process.pid}-${name}.txt`)
const recorder = `--import=${pathToFileURL(join(ROOT, 'test/support/loaded-modules.mjs')).href}`
const openTelemetryModules = (lines: string[]) => lines.filter((line) => /[/\\]node_modules[/\\](@opentelemetry|@fastify[/\\]otel|import-in-the-middle|require-in-the-middle)[/\\]/.test(line))

let databaseUrl: string
let redis: RedisServer
let receiver: Awaited<ReturnType<typeof startReceiver>>
const nodes: GatewayProcess[] = []

t.before(async () => {
  databaseUrl = await freshPostgresDatabase(t)
  redis = await startRedis()
  receiver = await startReceiver()
})

t.teardown(async () => {
  await Promise.allSettled(nodes.map((n) => n.stop()))
  await redis?.stop()
  await receiver?.close()
  for (const name of ['traced', 'plain']) rmSync(modulesFile(name), { force: true })
})

t.test('a node with OTEL_* variables exports its requests, their queries and commands, and the wait for acknowledgements; one without loads none of it', async (t) => {
  const shared = { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, CACHE_LEASE_MS: '500' }
  const traced = await startGatewayProcess(
    {
      ...shared,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      NODE_OPTIONS: recorder,
      LOADED_MODULES_FILE: modulesFile('traced'),
    },
    { name: 'traced' },
  )
  nodes.push(traced)
  const plain = await startGatewayProcess({ ...shared, NODE_OPTIONS: recorder, LOADED_MODULES_FILE: modulesFile('plain') }, { name: 'plain' })
  nodes.push(plain)

  const key = await setupCompany(traced.url)
  const issued = await call(traced.url, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: 'otel-user' })
  t.equal(issued.status, 200)
  // An allowed verification: its answer's bytes are prepared once (routes/verify.ts), and its span still ends.
  t.equal((await call(traced.url, 'GET', '/rest/v1/auth/verify', undefined, { authorization: `Bearer ${issued.body.token}` })).status, 200)
  const invalidated = await call(traced.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.body.user.id })
  t.equal(invalidated.status, 200)
  t.equal((await call(plain.url, 'GET', '/rest/v1/auth/verify', undefined, { authorization: `Bearer ${issued.body.token}` })).status, 401, 'the untraced node refuses the token: it acknowledged the change')
  // A client that puts a token in the query string: the span keeps the path alone.
  t.equal((await call(traced.url, 'GET', `/rest/v1/auth/verify?access_token=${issued.body.token}`, undefined, { authorization: `Bearer ${issued.body.token}` })).status, 401)

  const request = (route: string) => receiver.spans.find((s) => s.attributes['http.route'] === route && s.kind === SPAN_KIND_SERVER)
  const verifyRoute = '/rest/v1/auth/verify'
  const ackWait = () => receiver.spans.find((s) => s.name === 'wait for acknowledgements')
  const verification = (status: number) => receiver.spans.find((s) => s.attributes['http.route'] === verifyRoute && s.kind === SPAN_KIND_SERVER && s.attributes['http.response.status_code'] === status)
  await waitFor('the spans of the requests and of the acknowledgement wait', () => ({ token: request('/rest/v1/auth/token'), invalidate: request('/rest/v1/auth/invalidate-token'), verify: verification(401), allowed: verification(200), ack: ackWait() }), {
    timeoutMs: 15_000,
    everyMs: 100,
    until: (seen) => seen.token !== undefined && seen.invalidate !== undefined && seen.verify !== undefined && seen.allowed !== undefined && seen.ack !== undefined,
  })
  // Spans of a trace may leave in separate batches: let the rest of the requests' trees arrive.
  await new Promise((resolve) => setTimeout(resolve, 500))
  const spans = receiver.spans

  for (const [route, status] of [
    ['/rest/v1/auth/token', 200],
    ['/rest/v1/auth/invalidate-token', 200],
  ] as const) {
    const span = request(route)!
    t.equal(span.name, `POST ${route}`, `${route}: one server span, named by method and route`)
    t.equal(span.attributes['http.request.method'], 'POST')
    t.equal(span.attributes['http.response.status_code'], status, `${route}: its status`)
    t.equal(span.service, 'chat-auth', 'the service is chat-auth when OTEL_SERVICE_NAME is not set')
    t.equal(spans.filter((s) => s.attributes['http.route'] === route && s.kind === SPAN_KIND_SERVER).length, 1, `${route}: exactly one request span`)
    const inTrace = spans.filter((s) => s.traceId === span.traceId)
    const pg = inTrace.filter((s) => s.scope.includes('instrumentation-pg') && s.name !== 'pg-pool.connect' && s.name !== 'pg.connect')
    t.ok(pg.length > 0, `${route}: its PostgreSQL queries are spans of its trace`)
    t.ok(pg.every((s) => under(s, span, spans)), `${route}: each under the request span`)
    t.ok(pg.some((s) => s.attributes['db.system'] === 'postgresql' || s.attributes['db.system.name'] === 'postgresql'), `${route}: as PostgreSQL`)
  }

  const invalidate = request('/rest/v1/auth/invalidate-token')!
  const redisCalls = spans.filter((s) => s.traceId === invalidate.traceId && s.scope.includes('instrumentation-ioredis'))
  t.ok(redisCalls.length > 0, 'the invalidation publishes through Redis: its commands are spans of its trace')
  t.ok(redisCalls.every((s) => under(s, invalidate, spans)), 'under the request span')
  const statements = redisCalls.map((s) => s.attributes['db.query.text'] ?? s.attributes['db.statement'])
  t.ok(statements.every((statement) => typeof statement === 'string' && /^\w+$/.test(statement)), `a Redis span names the command, never its arguments (${[...new Set(statements)].join(', ')})`)

  t.equal(verification(200)!.name, `GET ${verifyRoute}`, 'the allowed verification: its span ended, with status 200')
  const verified = verification(401)!
  t.equal(verified.attributes['http.response.status_code'], 401, 'the verification of the revoked token: 401')
  t.equal(verified.attributes['url.path'], verifyRoute, 'url.path without the query string')
  const everything = JSON.stringify(spans)
  t.notOk(everything.includes(issued.body.token.split('.')[2]), 'no span holds the token (nor its signature)')
  t.notOk(everything.includes(key.keySecret), 'nor the API key secret')

  const ack = ackWait()!
  t.equal(ack.traceId, invalidate.traceId, 'the acknowledgement wait is in the invalidation trace')
  t.ok(under(ack, invalidate, spans), 'under its request span')
  t.equal(ack.attributes['chat_auth.ack.nodes'], 1, 'it waited for the one other node')
  t.equal(ack.attributes['chat_auth.ack.outcome'], 'acked', 'which acknowledged')
  t.equal(ack.attributes['chat_auth.ack.missing'], 0)

  t.same(
    spans.filter((s) => s.parentSpanId === undefined && s.kind !== SPAN_KIND_SERVER).map((s) => s.name),
    [],
    'no span without a request: the heartbeats, catch-up reads and housekeeping make none',
  )
  t.ok(receiver.paths.every((p) => p === 'POST /v1/traces application/json'), `only traces, as JSON, reach the receiver (${[...new Set(receiver.paths)].join('; ')})`)

  await Promise.all([traced.stop(), plain.stop()])
  const tracedModules = readFileSync(modulesFile('traced'), 'utf8').split('\n')
  const plainModules = readFileSync(modulesFile('plain'), 'utf8').split('\n')
  t.ok(plainModules.includes('exit') && tracedModules.includes('exit'), 'both processes wrote their lists at exit')
  t.ok(plainModules.some((line) => line.startsWith('esm ') && line.includes('/dist/src/server.js')), 'the ES modules of the server are in the list')
  t.ok(plainModules.some((line) => line.startsWith('cjs ') && line.includes('/node_modules/pg/')), 'and the CommonJS ones (pg)')
  t.ok(openTelemetryModules(tracedModules).some((line) => line.includes('@opentelemetry/sdk-node')), 'the traced node loaded the SDK (so the check below can fail)')
  t.ok(tracedModules.includes('otel-global trace'), 'and registered a tracer provider')
  // prom-client requires @opentelemetry/api for its exemplars (as before OpenTelemetry was added):
  // the API alone, with no provider registered, records nothing.
  t.same(
    openTelemetryModules(plainModules).filter((line) => !/node_modules[/\\]@opentelemetry[/\\]api[/\\]/.test(line)),
    [],
    'the node without OTEL_* variables loaded nothing of OpenTelemetry but the API prom-client requires',
  )
  t.notOk(plainModules.some((line) => line.startsWith('otel-global ')), 'and registered no global OpenTelemetry provider')
})

t.test('a node stopped by SIGTERM exports the spans still waiting for their batch before it exits', async (t) => {
  const before = receiver.spans.length
  // A batch every minute: only the flush at shutdown can deliver this request's span in time.
  const node = await startGatewayProcess(
    { DATA_DIR: 'memory://', OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '60000', OTEL_SERVICE_NAME: 'chat-auth-flush' },
    { name: 'flushed', waitFor: 'listening' },
  )
  nodes.push(node)
  t.equal((await call(node.url, 'GET', '/.well-known/jwks.json')).status, 200)
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.equal(receiver.spans.slice(before).filter((s) => s.service === 'chat-auth-flush').length, 0, 'nothing exported yet: the batch waits')
  await node.stop()
  t.equal(node.child.exitCode, 0, 'a clean exit')
  const flushed = receiver.spans.slice(before).filter((s) => s.service === 'chat-auth-flush' && s.attributes['http.route'] === '/.well-known/jwks.json')
  t.equal(flushed.length, 1, 'the request span arrived before the process exited')
  t.equal(flushed[0]?.name, 'GET /.well-known/jwks.json', 'OTEL_SERVICE_NAME names the service')
})
