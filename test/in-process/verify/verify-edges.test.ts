/**
 * Issue 10, findings 6 and 7 (verify): whatever a proxy forwards — any method Node's parser
 * accepts, any Expect header, any path below the endpoint, a QUERY without a content type —
 * the verify endpoint answers only 200, 401 or 503 (a proxy turns anything else into a 500);
 * a validly signed token with absurd claims is `Invalid token`, never 503.
 * Through a real listening server: Node itself answers some of these before Fastify sees them.
 */
import { METHODS } from 'node:http'
import { connect } from 'node:net'
import t from 'tap'
import { createTenant, decodeToken, forgeHs256, issueToken, serverErrorCounts, startApp, verify } from '../../support/helpers.js'
import { INVALID_TOKEN } from '../../support/spec-bodies.js'

const node = await startApp(t)
const acme = await createTenant(node)
const issued = await issueToken(node, acme, 'edge-user')
await node.app.listen({ port: 0, host: '127.0.0.1' })
const port = (node.app.server.address() as { port: number }).port

const CONTINUE = /^HTTP\/1\.1 100 Continue\r\n\r\n/

/** One request written by hand on a fresh connection; its status line's code and its body. */
async function raw(head: string, body = ''): Promise<{ status: number; text: string }> {
  const socket = connect(port, '127.0.0.1')
  socket.setEncoding('utf8')
  let text = ''
  socket.on('data', (chunk: string) => (text += chunk))
  socket.write(head.replace(/\n/g, '\r\n') + '\r\n' + body)
  await new Promise<void>((resolve) => {
    // Read until the answer is complete (Content-Length) or the server closes.
    const done = () => resolve()
    socket.on('close', done)
    socket.on('error', done)
    socket.on('data', () => {
      const answer = text.replace(CONTINUE, '')
      const end = answer.indexOf('\r\n\r\n')
      if (end < 0) return
      const length = /content-length: *(\d+)/i.exec(answer.slice(0, end))
      if (head.startsWith('HEAD ') || length === null || Buffer.byteLength(answer.slice(end + 4)) >= Number(length[1])) done()
    })
    setTimeout(done, 5000)
  })
  socket.destroy()
  // A 100 Continue (Node sends one for any Expect naming 100-continue) precedes the answer.
  text = text.replace(CONTINUE, '')
  const status = /^HTTP\/1\.1 (\d{3})/.exec(text)
  return { status: status ? Number(status[1]) : 0, text }
}

const request = (method: string, path: string, headers: string[] = [], body = '') =>
  raw([`${method} ${path} HTTP/1.1`, 'Host: gateway', ...headers, body ? `Content-Length: ${Buffer.byteLength(body)}` : '', ''].filter((line, i, all) => line !== '' || i === all.length - 1).join('\n') + '\n', body)

const BEARER = `Authorization: Bearer ${issued.token}`

t.test('every method Node accepts: 200 with a good token, 401 without one', async (t) => {
  for (const method of METHODS) {
    const allowed = await request(method, '/rest/v1/auth/verify', [BEARER])
    t.equal(allowed.status, 200, `${method} with a token`)
    const denied = await request(method, '/rest/v1/auth/verify/some/path')
    t.equal(denied.status, 401, `${method} without a token`)
  }
})

t.test('any Expect header: decided by the token, not answered 417 by Node', async (t) => {
  for (const expect of ['bogus', '100-continue-please', 'x=1']) {
    t.equal((await request('GET', '/rest/v1/auth/verify', [BEARER, `Expect: ${expect}`])).status, 200, expect)
    t.equal((await request('POST', '/rest/v1/auth/verify', [`Expect: ${expect}`], 'body')).status, 401, expect)
  }
})

t.test('paths below the endpoint, however they are written', async (t) => {
  for (const path of ['/rest/v1/auth/verify;x', '/rest/v1/auth/verify;jsessionid=1/a', '/rest/v1/auth/verify/', '/rest/v1/auth/verify/%zz', '/rest/v1/auth/verify?x=1', '/rest/v1/auth/verify/a;b?c']) {
    t.equal((await request('GET', path, [BEARER])).status, 200, path)
    t.equal((await request('GET', path)).status, 401, path)
  }
})

t.test('QUERY (and any body method) without a content type: decided by the token', async (t) => {
  const logged = node.logs.length
  t.equal((await request('QUERY', '/rest/v1/auth/verify', [BEARER], '{"q":1}')).status, 200)
  t.equal((await request('QUERY', '/rest/v1/auth/verify', [], 'anything')).status, 401)
  t.equal((await request('PROPFIND', '/rest/v1/auth/verify', [BEARER, 'Content-Type: text/xml'], '<x/>')).status, 200)
  t.same(node.logs.slice(logged).filter((line) => /"level":50/.test(line)), [], 'no error logged')
})

t.test('absurd claims in a validly signed token: Invalid token, never 503', async (t) => {
  const { header, payload } = decodeToken(issued.token)
  for (const exp of [1e300, 8.64e12 + 1, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2]) {
    const response = await verify(node, forgeHs256(header, { ...payload, exp }))
    t.equal(response.statusCode, 401, `exp ${exp}`)
    t.strictSame(response.json(), INVALID_TOKEN, `exp ${exp}`)
  }
  t.same(await serverErrorCounts(node), [], 'no 5xx answered')
})
