/**
 * Issue 19, point 3: large headers. nginx accepts headers up to 4 × 8 KB by default; Node's
 * parser refused more than 16 KB with 431, and nginx turns any verify status but 2xx, 401
 * and 403 into 500. The verify endpoint answers only 200, 401 or 503 whatever arrives:
 * headers up to MAX_HEADER_SIZE are read and the token decides; beyond it, or when Node's
 * parser refuses the request, the verify path is denied (401), never 431 or 400.
 * Through a real listening server: Node's parser answers these before Fastify sees them.
 */
import { connect } from 'node:net'
import t from 'tap'
import { createTenant, issueToken, startApp, type TestApp } from '../../support/helpers.js'
import { errorBody } from '../../support/helpers.js'
import { INVALID_TOKEN } from '../../support/spec-bodies.js'

const HEADERS_TOO_LARGE = errorBody(431, 'Request headers are too large', 'HEADERS_TOO_LARGE')
const MALFORMED_REQUEST = errorBody(400, 'Malformed HTTP request', 'MALFORMED_REQUEST')

async function listening(node: TestApp): Promise<number> {
  await node.app.listen({ port: 0, host: '127.0.0.1' })
  return (node.app.server.address() as { port: number }).port
}

interface Answer {
  status: number
  headers: string
  body: string
}

/**
 * One request written by hand on a fresh connection, in the pieces given (a pause between
 * them, so that the server reads them apart); the answer's status, head and body.
 */
async function raw(port: number, pieces: string[], untilClosed = false): Promise<Answer> {
  const socket = connect(port, '127.0.0.1')
  socket.setEncoding('latin1')
  let text = ''
  socket.on('data', (chunk: string) => (text += chunk))
  const ended = new Promise<void>((resolve) => {
    const done = () => resolve()
    socket.on('close', done)
    socket.on('error', done)
    socket.on('data', () => {
      const end = text.indexOf('\r\n\r\n')
      const length = end < 0 ? null : /content-length: *(\d+)/i.exec(text.slice(0, end))
      if (!untilClosed && length && Buffer.byteLength(text.slice(end + 4), 'latin1') >= Number(length[1])) done()
    })
    setTimeout(done, 5000).unref()
  })
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
  for (const [index, piece] of pieces.entries()) {
    if (index > 0) await new Promise((resolve) => setTimeout(resolve, 30))
    if (socket.destroyed) break
    socket.write(piece)
  }
  await ended
  socket.destroy()
  const end = text.indexOf('\r\n\r\n')
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text)
  return { status: status ? Number(status[1]) : 0, headers: text.slice(0, end).toLowerCase(), body: text.slice(end + 4) }
}

const filler = (count: number, size: number) => Array.from({ length: count }, (_, i) => `X-Filler-${i}: ${'f'.repeat(size)}\r\n`).join('')
const head = (method: string, path: string, headers: string) => `${method} ${path} HTTP/1.1\r\nHost: gateway\r\n${headers}`

const node = await startApp(t)
const acme = await createTenant(node)
const issued = await issueToken(node, acme, 'header-user')
const port = await listening(node)
const bearer = `Authorization: Bearer ${issued.token}\r\n`

t.test('a valid token with three 7 KB headers (what nginx accepts): decided by the token', async (t) => {
  for (const [method, path] of [
    ['GET', '/rest/v1/auth/verify'],
    ['POST', '/rest/v1/auth/verify'],
    ['GET', '/rest/v1/auth/verify/chat/rooms/1'],
    ['GET', '/rest/v1/auth/verify;x=1'],
  ] as const) {
    const allowed = await raw(port, [head(method, path, bearer + filler(3, 7 * 1024)) + 'Content-Length: 0\r\n\r\n'])
    t.equal(allowed.status, 200, `${method} ${path}: 200`)
    t.equal(JSON.parse(allowed.body).user.id, issued.user.id, `${method} ${path}: the token's user`)
    const denied = await raw(port, [head(method, path, filler(3, 7 * 1024)) + 'Content-Length: 0\r\n\r\n'])
    t.equal(denied.status, 401, `${method} ${path} without a token: 401`)
  }
})

t.test('headers of 60 KB (Envoy accepts up to 60 KB): decided by the token', async (t) => {
  const allowed = await raw(port, [head('GET', '/rest/v1/auth/verify', bearer + filler(6, 10 * 1024 - 20)) + '\r\n'])
  t.equal(allowed.status, 200)
})

t.test('headers beyond MAX_HEADER_SIZE on the verify path: 401 with the denial body, never 431', async (t) => {
  const overflowing = filler(10, 10 * 1024)
  for (const [label, pieces] of [
    ['in one write', [head('GET', '/rest/v1/auth/verify', bearer + overflowing) + '\r\n']],
    ['the request line first, the headers later', [head('GET', '/rest/v1/auth/verify', bearer), overflowing.slice(0, 30_000), overflowing.slice(30_000) + '\r\n']],
    ['below the endpoint', [head('POST', '/rest/v1/auth/verify/chat', bearer + overflowing) + '\r\n']],
    ['one huge Authorization header', [head('GET', '/rest/v1/auth/verify', `Authorization: Bearer ${'a'.repeat(100 * 1024)}\r\n`) + '\r\n']],
  ] as const) {
    const answer = await raw(port, [...pieces])
    t.equal(answer.status, 401, `${label}: 401`)
    t.strictSame(JSON.parse(answer.body), INVALID_TOKEN, `${label}: the SPEC's denial body`)
    t.match(answer.headers, /www-authenticate: bearer error="invalid_token"/, `${label}: the bearer challenge`)
  }
  t.equal((await raw(port, [head('GET', '/rest/v1/auth/verify', bearer) + '\r\n'])).status, 200, 'and the node answers afterwards')
  // A proxy reuses its connections (nginx's keepalive upstreams): the second call on one is denied, not reset.
  const reused = await raw(port, [head('GET', '/rest/v1/auth/verify', bearer) + '\r\n', head('GET', '/rest/v1/auth/verify', bearer + overflowing) + '\r\n'], true)
  t.equal(reused.status, 200, 'on a kept-alive connection: the first call allowed')
  t.match(reused.body, /\r\n\r\n\{"statusCode":401,"message":"Invalid token","code":"INVALID_TOKEN"\}$/, 'the second, over the limit, denied with 401')
})

t.test("a request Node's parser refuses on the verify path: 401, never 400", async (t) => {
  for (const [label, request] of [
    ['a header name with a space', head('GET', '/rest/v1/auth/verify', bearer + 'Bad Name: x\r\n') + '\r\n'],
    ['a bare CR inside a header value', head('GET', '/rest/v1/auth/verify', bearer + 'X-A: a\rb\r\n') + '\r\n'],
  ] as const) {
    const answer = await raw(port, [request])
    t.equal(answer.status, 401, `${label}: 401`)
    t.strictSame(JSON.parse(answer.body), INVALID_TOKEN, label)
  }
  // The headers were whole: the token decided, and the broken body after them adds nothing to the answer.
  const chunked = await raw(port, [head('POST', '/rest/v1/auth/verify', bearer + 'Transfer-Encoding: chunked\r\n') + '\r\nzz\r\n'])
  t.equal(chunked.status, 200, 'an invalid chunked body after the headers: decided by the token')
  t.equal(JSON.parse(chunked.body).user.id, issued.user.id, 'and nothing is written after the answer')
})

t.test('other routes: 431 and 400 with SPEC bodies', async (t) => {
  // A limit that one packet overflows, so that the path is read from it.
  const small = await startApp(t, { MAX_HEADER_SIZE: '16384' })
  const smallPort = await listening(small)
  const tooLarge = await raw(smallPort, [head('GET', '/healthz', filler(3, 7 * 1024)) + '\r\n'])
  t.equal(tooLarge.status, 431)
  t.strictSame(JSON.parse(tooLarge.body), HEADERS_TOO_LARGE)
  const verifyTooLarge = await raw(smallPort, [head('GET', '/rest/v1/auth/verify', bearer + filler(3, 7 * 1024)) + '\r\n'])
  t.equal(verifyTooLarge.status, 401, 'the verify path on the same node: 401')
  const malformed = await raw(port, [head('GET', '/healthz', 'Bad Name: x\r\n') + '\r\n'])
  t.equal(malformed.status, 400)
  t.strictSame(JSON.parse(malformed.body), MALFORMED_REQUEST)
})
