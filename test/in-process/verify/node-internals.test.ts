/**
 * src/http/node-internals.ts: the one door to Node's private internals, each used only where
 * the start-up check (node-internals-check.ts) found it behaving as expected, the public API
 * otherwise; TEST_NODE_INTERNALS=false takes the public API whatever the check found.
 *
 * This Node passes the check; a Node whose internals are missing or behave otherwise makes it
 * fall back, saying why. And the two ways put the same bytes on the wire: two listening
 * nodes over one store and one bus, one each way, are sent the same requests on raw sockets
 * (verify 200, HEAD and 401 answers, pipelined; token answers; what Node's parser refuses
 * on the verify path; an event stream), and what comes back is compared byte for byte. Only
 * what differs between any two answers is masked: the `date` header, a token's own value
 * and expiry (each issue signs a new one, of the same length), an event stream's cursors.
 */
import { connect } from 'node:net'
import t from 'tap'
import { createMemoryBus } from '../../../src/bus/memory-bus.js'
import { checkNodeInternals } from '../../../src/http/node-internals-check.js'
import { internalsFrom, nodePieces, writeHeadWithPairs, type NodePieces } from '../../../src/http/node-internals.js'
import { createTenant, invalidate, issueToken, sharedDb, startApp, type TestApp } from '../../support/helpers.js'

t.test('this Node passes the start-up check: each of its internals is used', async (t) => {
  const found = await checkNodeInternals(nodePieces())
  t.type(found.headers, 'function', `headers under kOutHeaders: ${String(found.headers)}`)
  t.type(found.writes, 'object', `a socket's writes held: ${String(found.writes)}`)
  t.type(found.connections, 'object', `the connection's parser and answer: ${String(found.connections)}`)
  t.same(internalsFrom(found).ways, { headers: 'internal', writes: 'internal', connections: 'internal' })
})

t.test('a Node whose internals are missing or behave otherwise: the check falls back to the public API, saying why', async (t) => {
  const real = nodePieces()
  const variants: Array<[string, Partial<NodePieces>, 'headers' | 'writes' | 'connections', RegExp]> = [
    ['no kOutHeaders symbol', { outHeaders: undefined }, 'headers', /no kOutHeaders symbol/],
    ['a symbol of that name the response does not keep its headers under', { outHeaders: Symbol('kOutHeaders') }, 'headers', /did not take the headers/],
    ['no _writeGeneric', { writeGeneric: undefined }, 'writes', /no write implementation or destroy/],
    ['no _destroy', { socketDestroy: undefined }, 'writes', /no write implementation or destroy/],
    ['a _writeGeneric that writes nothing', { writeGeneric: (_writev, _data, _encoding, cb) => cb() }, 'writes', /left as other bytes/],
    ['a _writeGeneric that writes other bytes', { writeGeneric: function (this, writev, data, encoding, cb) { real.writeGeneric!.call(this, false, 'HTTP/1.1 500 X\r\n\r\n', 'latin1', cb) } }, 'writes', /left as other bytes/],
    ['a socket without its parser', { requestOf: () => undefined }, 'connections', /are not the request and its answer/],
    ['a socket without its answer', { responseOf: () => null }, 'connections', /are not the request and its answer/],
  ]
  for (const [label, broken, need, why] of variants) {
    const found = await checkNodeInternals({ ...real, ...broken })
    t.match(found[need], why, `${label}: ${need} take the public API`)
    const internals = internalsFrom(found)
    t.match(internals.ways[need], /^public API: /, `${label}: logged as such`)
    if (need === 'headers') t.equal(internals.writeHead, writeHeadWithPairs, `${label}: writeHead gets the pairs`)
    if (need === 'writes') t.equal(internals.socketWrites, undefined, `${label}: each answer written as it is ready`)
    for (const other of (['headers', 'writes', 'connections'] as const).filter((n) => n !== need)) t.not(typeof found[other], 'string', `${label}: ${other} still checked and used`)
  }
})

/** `raw` on a new connection, and every byte that comes back until the server closes it (or 5 s). */
async function exchange(port: number, raw: string | string[]): Promise<string> {
  const socket = connect(port, '127.0.0.1')
  socket.setEncoding('latin1')
  let text = ''
  socket.on('data', (chunk: string) => (text += chunk))
  const closed = new Promise<void>((resolve) => {
    socket.on('close', () => resolve())
    socket.on('error', () => resolve())
    setTimeout(resolve, 5000).unref()
  })
  for (const [index, piece] of ([] as string[]).concat(raw).entries()) {
    if (index > 0) await new Promise((resolve) => setTimeout(resolve, 30))
    socket.write(piece)
  }
  await closed
  socket.destroy()
  return text
}

/** What differs between any two answers, whichever way they were written. */
const masked = (text: string) =>
  text
    .replace(/\r\ndate: [^\r]*/gi, '\r\ndate: <date>')
    .replace(/"token":"[^"]*"/g, (m) => `"token":"${'t'.repeat(m.length - 11)}"`)
    .replace(/"expiresAt":"[^"]*"/g, '"expiresAt":"<expiresAt>"')

async function listening(node: TestApp): Promise<number> {
  await node.app.listen({ port: 0, host: '127.0.0.1' })
  return (node.app.server.address() as { port: number }).port
}

t.test('both ways put the same bytes on the wire', async (t) => {
  const deployment = { db: await sharedDb(t), bus: createMemoryBus() }
  const internal = await startApp(t, { TEST_NODE_INTERNALS: 'true' }, deployment)
  const publicApi = await startApp(t, { TEST_NODE_INTERNALS: 'false' }, deployment)
  const logged = (node: TestApp) => node.logs.map((line) => JSON.parse(line)).filter((line) => line.nodeInternals !== undefined)
  t.match(logged(internal), [{ level: 30, nodeInternals: { headers: 'internal', writes: 'internal', connections: 'internal' } }], 'the node logs once, at info, that it uses them')
  t.equal(logged(internal).length, 1)
  t.match(logged(publicApi), [{ level: 30, nodeInternals: { headers: /^public API: not used/, writes: /^public API: not used/, connections: /^public API: not used/ } }], 'and the other, that it does not')
  const ports = [await listening(internal), await listening(publicApi)] as const

  const tenant = await createTenant(internal)
  const { token } = await issueToken(internal, tenant, 'alice')
  const bearer = `authorization: Bearer ${token}\r\n`
  const request = (method: string, path: string, headers = '', body = '') =>
    `${method} ${path} HTTP/1.1\r\nhost: x\r\n${headers}${body ? `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` : ''}\r\n${body}`
  const tokenBody = (secret: string, extra = {}) => JSON.stringify({ keyId: tenant.keyId, keySecret: secret, userId: 'alice', ...extra })

  const exchanges: Array<[string, string | string[], RegExp]> = [
    [
      'verify: allowed, HEAD, below the path, refused (no token, a bad one, a revoked user comes later), pipelined',
      [
        request('GET', '/rest/v1/auth/verify', bearer),
        request('HEAD', '/rest/v1/auth/verify', bearer),
        request('POST', '/rest/v1/auth/verify/anything;x=1', bearer),
        request('GET', '/rest/v1/auth/verify'),
        request('GET', '/rest/v1/auth/verify', `authorization: Bearer ${token}x\r\n`),
        request('GET', '/rest/v1/auth/verify', bearer + 'connection: close\r\n'),
      ].join(''),
      /^HTTP\/1\.1 200 OK\r\n[\s\S]*HTTP\/1\.1 401 Unauthorized\r\n[\s\S]*"code":"INVALID_TOKEN"[\s\S]*HTTP\/1\.1 200 OK\r\n[\s\S]*connection: close\r\n/i,
    ],
    [
      'token: issued, a wrong secret, a bad lifetime',
      [
        request('POST', '/rest/v1/auth/token', '', tokenBody(tenant.keySecret)),
        request('POST', '/rest/v1/auth/token', '', tokenBody(tenant.keySecret.slice(0, -1) + (tenant.keySecret.endsWith('A') ? 'B' : 'A'))),
        request('POST', '/rest/v1/auth/token', 'connection: close\r\n', tokenBody(tenant.keySecret, { expiresIn: 'soon' })),
      ].join(''),
      /^HTTP\/1\.1 200 OK\r\n[\s\S]*"token":"t+"[\s\S]*HTTP\/1\.1 401 Unauthorized\r\n[\s\S]*HTTP\/1\.1 400 Bad Request\r\n/,
    ],
    ['verify: headers past MAX_HEADER_SIZE, refused by Node\'s parser: 401', request('GET', '/rest/v1/auth/verify', bearer + `x-filler: ${'f'.repeat(70 * 1024)}\r\n`), /^HTTP\/1\.1 401 Unauthorized\r\n/],
    [
      'verify: a chunked body broken in the packet of its headers: the token decides, and nothing is written after the answer',
      request('POST', '/rest/v1/auth/verify', bearer + 'transfer-encoding: chunked\r\n') + 'zz\r\n',
      /^HTTP\/1\.1 200 OK\r\n[^]*\}$/,
    ],
    [
      'verify: a chunked body broken after the answer: the connection is cut, nothing more written',
      [request('POST', '/rest/v1/auth/verify', bearer + 'transfer-encoding: chunked\r\n'), 'zz\r\n'],
      /^HTTP\/1\.1 200 OK\r\n[^]*\}$/,
    ],
  ]
  for (const [label, raw, shape] of exchanges) {
    const [viaInternals, viaPublicApi] = (await Promise.all(ports.map((port) => exchange(port, raw)))) as [string, string]
    t.match(masked(viaInternals), shape, `${label}: answered`)
    t.equal(masked(viaInternals), masked(viaPublicApi), `${label}: the same bytes`)
  }

  // An event stream on each node, then a change both learn of (the one bus): the same stream.
  const basic = `authorization: Basic ${Buffer.from(`${tenant.keyId}:${tenant.keySecret}`).toString('base64')}\r\n`
  const streams = ports.map((port) => {
    const socket = connect(port, '127.0.0.1')
    socket.setEncoding('latin1')
    let text = ''
    socket.on('data', (chunk: string) => (text += chunk))
    socket.write(request('GET', '/rest/v1/auth/events', basic))
    return { socket, read: () => text }
  })
  t.teardown(() => streams.forEach(({ socket }) => socket.destroy()))
  const until = async (done: () => boolean) => {
    for (let waited = 0; !done() && waited < 5000; waited += 20) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  await until(() => streams.every(({ read }) => read().includes(': open')))
  const user = (await issueToken(internal, tenant, 'bob')).user
  t.equal((await invalidate(internal, tenant, user.id)).statusCode, 200)
  await until(() => streams.every(({ read }) => read().includes('event: tokens.invalidated')))
  // what the stream's chunks carry, its cursors masked (each node's read has a snapshot of its own)
  const stream = (text: string) => {
    const end = text.indexOf('\r\n\r\n')
    let body = ''
    for (let rest = text.slice(end + 4); rest.length > 0; ) {
      const size = Number.parseInt(rest, 16)
      const start = rest.indexOf('\r\n') + 2
      if (!(size > 0) || start < 2) break
      body += rest.slice(start, start + size)
      rest = rest.slice(start + size + 2)
    }
    return masked(text.slice(0, end)) + '\r\n\r\n' + body.replace(/^id: .*$/gm, 'id: <cursor>')
  }
  const [viaInternals, viaPublicApi] = streams.map(({ read }) => stream(read())) as [string, string]
  t.match(viaInternals, /^HTTP\/1\.1 200 OK\r\n[\s\S]*content-type: text\/event-stream[\s\S]*\r\n\r\n: open\n\nid: <cursor>\nevent: tokens\.invalidated\ndata: \{/)
  t.equal(viaInternals, viaPublicApi, 'the event stream: the same bytes')
})
