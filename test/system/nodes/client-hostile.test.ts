/**
 * The typed client (chat-auth-gateway/client) against hops that answer what a gateway never
 * does, each a real node:http server on 127.0.0.1: a redirect to another origin (a
 * misconfigured load balancer or ingress) is never followed, and an answer is never read past
 * `maxResponseBytes`.
 */
import { gzipSync } from 'node:zlib'
import t, { type Test } from 'tap'
import { ChatAuthClient, ChatAuthError, CLIENT_CODES } from '../../../src/client/index.js'
import { answerJson, hostileServer, redirectTo, writeBytes, type HostileServer } from '../../support/hostile-http.js'

const SECRET = 'sk_secret_that_must_stay_home'
const ADMIN = 'admin-token-that-must-stay-home-0123456789'
const MiB = 1024 * 1024

async function server(t: Test, answer: Parameters<typeof hostileServer>[0]): Promise<HostileServer> {
  const made = await hostileServer(answer)
  t.teardown(() => made.close())
  return made
}

/** The rejection of `promise`, which must be a ChatAuthError. */
async function failure(promise: Promise<unknown>): Promise<ChatAuthError> {
  const error = await promise.then(
    (value) => new Error(`resolved with ${JSON.stringify(value)?.slice(0, 200)}`),
    (error: unknown) => error,
  )
  if (!(error instanceof ChatAuthError)) throw new Error(`expected a ChatAuthError, got ${String(error)}`)
  return error
}

const client = (baseUrl: string, options: Partial<ConstructorParameters<typeof ChatAuthClient>[0]> = {}) =>
  new ChatAuthClient({ baseUrl, apiKey: { keyId: 'ak_test', keySecret: SECRET }, adminToken: ADMIN, retries: 3, retryDelayMs: 1, ...options })

/** Every call that carries the key's secret, or whose write a 302 or 303 would turn into a GET. */
const CALLS = [
  ['issueToken', (c: ChatAuthClient) => c.issueToken({ userId: 'user-42' })],
  ['invalidate', (c: ChatAuthClient) => c.invalidate('0b8e4c0e-5a43-4c5e-9d83-2f2a6b1f7d11')],
  ['revokeToken', (c: ChatAuthClient) => c.revokeToken('eyJ.a.b')],
  ['oauth.introspect', (c: ChatAuthClient) => c.oauth.introspect('eyJ.a.b')],
  ['oauth.revoke', (c: ChatAuthClient) => c.oauth.revoke('eyJ.a.b')],
  ['admin.revokeCompanyTokens', (c: ChatAuthClient) => c.admin.revokeCompanyTokens('c1')],
  ['admin.updateCustomerUser({active:false})', (c: ChatAuthClient) => c.admin.updateCustomerUser('u1', { active: false })],
  ['verify', (c: ChatAuthClient) => c.verify('eyJ.a.b')],
  ['admin.getCompany', (c: ChatAuthClient) => c.admin.getCompany('c1')],
] as const

// ── Redirects ───────────────────────────────────────────────────────────────

t.test('a redirect is never followed: REDIRECT_REFUSED with its Location, nothing sent to the other origin, never retried', async (t) => {
  // Whatever the redirect points at answers like a gateway would: a client that followed it
  // would resolve, although the gateway never received the call.
  const elsewhere = await server(t, answerJson(200, { message: 'ok', active: true, token: 'x', companyId: 'c1', id: 'u1' }))
  let status = 307
  const misrouted = await server(t, (request, response, seen) => redirectTo(status, `${elsewhere.origin}${seen.url}`)(request, response, seen))
  for (const redirect of [301, 302, 303, 307, 308]) {
    status = redirect
    for (const [name, call] of CALLS) {
      misrouted.seen.length = 0
      const error = await failure(call(client(misrouted.url)))
      const what = `${redirect} on ${name}`
      t.same({ statusCode: error.statusCode, code: error.code }, { statusCode: redirect, code: CLIENT_CODES.REDIRECT_REFUSED }, `${what}: REDIRECT_REFUSED with the answer's status`)
      t.match(error.message, `${elsewhere.origin}/`, `${what}: the message names the Location`)
      t.equal(misrouted.seen.length, 1, `${what}: sent once, never retried`)
    }
  }
  t.same(elsewhere.seen, [], 'the other origin received nothing: no secret, no write turned into a GET')
})

t.test('a relative Location, or none: still refused, and said so', async (t) => {
  let headers: Record<string, string> = { location: '/rest/v2/moved' }
  const hop = await server(t, (_request, response) => response.writeHead(308, headers).end())
  t.match(await failure(client(hop.url).issueToken({ userId: 'u' })), { statusCode: 308, code: CLIENT_CODES.REDIRECT_REFUSED, message: /\/rest\/v2\/moved/ })
  headers = {}
  const bare = await failure(client(hop.url).verify('eyJ.a.b'))
  t.match(bare, { statusCode: 308, code: CLIENT_CODES.REDIRECT_REFUSED, message: /redirect/ })
  t.equal(hop.seen.length, 2, 'one request each')
})

t.test("a browser's fetch hands back an opaque redirect (status 0, no headers): refused, and said so", async (t) => {
  // What `redirect: 'manual'` gives in a browser; Node's fetch gives the real 3xx (above).
  const calls: RequestInit[] = []
  const opaque = (async (_url: URL, init: RequestInit) => {
    calls.push(init)
    return { type: 'opaqueredirect', status: 0, ok: false, redirected: false, url: '', headers: new Headers(), body: null } as unknown as Response
  }) as typeof fetch
  const error = await failure(client('http://gateway.invalid/', { fetch: opaque }).revokeToken('eyJ.a.b'))
  t.match(error, { statusCode: 0, code: CLIENT_CODES.REDIRECT_REFUSED, message: /redirect/ })
  t.equal(calls.length, 1, 'not retried')
  t.equal(calls[0]!.redirect, 'manual', 'fetch is told not to follow')
})

t.test('a fetch given as an option that follows a redirect anyway: its answer is not taken', async (t) => {
  const elsewhere = await server(t, answerJson(200, { message: 'ok', customerUserId: 'u1', newTokenVersion: 1 }))
  const hop = await server(t, redirectTo(302, `${elsewhere.origin}/rest/v1/auth/invalidate-token`))
  const following = ((url: URL, init: RequestInit) => fetch(url, { ...init, redirect: 'follow' })) as typeof fetch
  const error = await failure(client(hop.url, { fetch: following }).invalidate('u1'))
  t.match(error, { statusCode: 200, code: CLIENT_CODES.REDIRECT_REFUSED, message: `${elsewhere.origin}/rest/v1/auth/invalidate-token` }, 'the write that became a GET elsewhere is not a success')
})

// ── Bounded answers ─────────────────────────────────────────────────────────

/** How much of an answer of `total` bytes a client may read (the bound, 4 MiB) plus what sits in socket buffers: far below `total`. */
const TOTAL = 256 * MiB
const FAR_BELOW = TOTAL / 4

/** A server that answers every request with `head`, then `total` bytes, and keeps what it managed to write. */
async function flood(t: Test, head: Record<string, string>, total: number, options: { cut?: boolean } = {}) {
  const written: number[] = []
  const hop = await server(t, (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json', ...head })
    response.flushHeaders()
    void writeBytes(response, total, options).then((bytes) => written.push(bytes))
  })
  const writtenOnce = async () => {
    while (written.length === 0) await new Promise((resolve) => setTimeout(resolve, 10))
    return written[0]!
  }
  return { hop, writtenOnce }
}

t.test('an answer larger than maxResponseBytes (4 MiB by default) fails at the bound, unread', async (t) => {
  for (const [name, head, options] of [
    ['with its Content-Length', { 'content-length': String(TOTAL) }, {}],
    ['chunked, no length', {}, {}],
    ['a huge Content-Length (1 TiB), then a hang-up', { 'content-length': String(2 ** 40) }, { cut: true }],
  ] as const) {
    const { hop, writtenOnce } = await flood(t, head, TOTAL, options)
    const error = await failure(client(hop.url).admin.getCompany('c1'))
    t.same({ statusCode: error.statusCode, code: error.code }, { statusCode: 200, code: CLIENT_CODES.RESPONSE_TOO_LARGE }, `${name}: RESPONSE_TOO_LARGE`)
    t.match(error.message, /4194304 bytes/, `${name}: the message names the bound`)
    t.match(error.message, /maxResponseBytes/, `${name}: and the option that sets it`)
    const written = await writtenOnce()
    t.ok(written < FAR_BELOW, `${name}: the server wrote ${written} of ${TOTAL} bytes before the client hung up (less than ${FAR_BELOW})`)
    t.equal(hop.seen.length, 1, `${name}: not retried`)
  }
})

t.test('a small body that inflates past the bound (gzip) fails the same way', async (t) => {
  const bomb = gzipSync(Buffer.alloc(64 * MiB, ' '))
  const hop = await server(t, (_request, response) => response.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(bomb))
  t.match(await failure(client(hop.url).verify('eyJ.a.b')), { statusCode: 200, code: CLIENT_CODES.RESPONSE_TOO_LARGE })
})

t.test('maxResponseBytes lowers or raises the bound; an answer of exactly the bound is read', async (t) => {
  const body = JSON.stringify({ id: 'c1', name: 'x'.repeat(6 * MiB) })
  for (const [name, head] of [
    ['with its Content-Length', { 'content-length': String(Buffer.byteLength(body)) }],
    ['chunked', {}],
  ] as const) {
    const hop = await server(t, (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json', ...head })
      response.end(body)
    })
    t.match(await failure(client(hop.url).admin.getCompany('c1')), { code: CLIENT_CODES.RESPONSE_TOO_LARGE }, `${name}: 6 MiB is past the default`)
    t.equal((await client(hop.url, { maxResponseBytes: 8 * MiB }).admin.getCompany('c1')).id, 'c1', `${name}: raised to 8 MiB, it is read`)
    t.equal((await client(hop.url, { maxResponseBytes: body.length }).admin.getCompany('c1')).id, 'c1', `${name}: exactly at the bound, it is read`)
    const lowered = await failure(client(hop.url, { maxResponseBytes: body.length - 1 }).admin.getCompany('c1'))
    t.match(lowered, { statusCode: 200, code: CLIENT_CODES.RESPONSE_TOO_LARGE, message: new RegExp(`${body.length - 1} bytes`) }, `${name}: one byte less, refused`)
  }
  const small = await server(t, answerJson(401, { statusCode: 401, code: 'TOKEN_REVOKED', message: 'Token has been revoked' }))
  t.match(await failure(client(small.url, { maxResponseBytes: 16 }).verify('eyJ.a.b')), { statusCode: 401, code: CLIENT_CODES.RESPONSE_TOO_LARGE }, 'an error body is bounded too')
  t.match(await failure(client(small.url, { maxResponseBytes: 1024 }).verify('eyJ.a.b')), { statusCode: 401, code: 'TOKEN_REVOKED' }, 'and read within it')
})

t.test('maxResponseBytes is checked when the client is made', async (t) => {
  for (const value of [0, -1, 1.5, NaN, Infinity, '4096', 2 ** 53]) {
    t.throws(() => client('http://127.0.0.1:1/', { maxResponseBytes: value as number }), { name: 'TypeError', message: /client option maxResponseBytes\b/ }, String(value))
  }
  t.doesNotThrow(() => client('http://127.0.0.1:1/', { maxResponseBytes: 1 }), 'one byte')
})
