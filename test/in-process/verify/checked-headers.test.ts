/**
 * src/http/checked-headers.ts checks a verify answer's headers once, and
 * src/http/node-internals.ts writes them through the headers a Node response holds (Node's
 * private `kOutHeaders`), past Node's per-response check. These pin that this Node still has
 * that symbol and that the start-up check finds it usable (an upgrade that drops it fails
 * here instead of slowing every verification), that both ways put the same bytes on the
 * wire, and that a response which already holds headers of its own keeps them.
 */
import t from 'tap'
import { createServer, type ServerResponse } from 'node:http'
import { connect, type AddressInfo } from 'node:net'
import { checkHeaders, type CheckedHeaders } from '../../../src/http/checked-headers.js'
import { nodePieces, writeHeadHeld, writeHeadWithPairs } from '../../../src/http/node-internals.js'
import { checkNodeInternals } from '../../../src/http/node-internals-check.js'

const heldHeadersSymbol = nodePieces().outHeaders
const writeCheckedHead = (response: ServerResponse, status: number, headers: CheckedHeaders) => writeHeadHeld(heldHeadersSymbol!)(response, status, headers)

const PAIRS = ['cache-control', 'no-store', 'X-Auth-User-Id', 'u-1', 'x-auth-external-id', 'caf%C3%A9', 'content-type', 'application/json; charset=utf-8', 'content-length', '2']

/** The raw bytes of one answer from a server whose only handler is `answer`. */
async function wireBytes(answer: (response: ServerResponse) => void): Promise<string> {
  const server = createServer((_request, response) => {
    response.sendDate = false
    answer(response)
    response.end('{}')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
    socket.setEncoding('latin1')
    let text = ''
    socket.on('data', (chunk: string) => (text += chunk))
    socket.write('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
    await new Promise((resolve) => socket.on('close', resolve))
    return text
  } finally {
    server.close()
  }
}

t.test('this Node keeps a response\'s headers under kOutHeaders, which the fast way needs', async (t) => {
  t.type(heldHeadersSymbol, 'symbol')
  t.type((await checkNodeInternals(nodePieces())).headers, 'function', 'and the start-up check found it behaving as expected: the node uses it')
})

t.test('checked headers put the very bytes on the wire that writeHead with the pairs does', async (t) => {
  const headers = checkHeaders(PAIRS)
  const checked = await wireBytes((response) => writeCheckedHead(response, 200, headers))
  const plain = await wireBytes((response) => response.writeHead(200, [...PAIRS]))
  t.equal(checked, plain)
  t.equal(await wireBytes((response) => writeHeadWithPairs(response, 200, headers)), plain, 'the public way node-internals.ts falls back to: the same')
  t.match(checked, /^HTTP\/1\.1 200 OK\r\ncache-control: no-store\r\nX-Auth-User-Id: u-1\r\nx-auth-external-id: caf%C3%A9\r\n/)
  // a second answer from the same prepared headers: the same again (nothing was changed by the first)
  t.equal(await wireBytes((response) => writeCheckedHead(response, 200, headers)), plain)
  t.ok(Object.isFrozen(headers.held) && Object.isFrozen(headers.pairs), 'shared by every response: frozen')
})

t.test('a response that already holds a header keeps it: the pairs go through writeHead', async (t) => {
  const headers = checkHeaders(PAIRS)
  const bytes = await wireBytes((response) => {
    response.setHeader('x-set-before', 'kept')
    writeCheckedHead(response, 200, headers)
  })
  t.match(bytes, /\r\nx-set-before: kept\r\n/)
  t.match(bytes, /\r\nX-Auth-User-Id: u-1\r\n/)
  t.equal(Object.keys(headers.held).length, PAIRS.length / 2, 'the prepared headers untouched')
})

t.test('what Node would refuse is refused once, when the headers are checked', async (t) => {
  t.throws(() => checkHeaders(['bad name', 'v']), { code: 'ERR_INVALID_HTTP_TOKEN' })
  t.throws(() => checkHeaders(['x-ok', 'line\r\nbreak']), { code: 'ERR_INVALID_CHAR' })
  t.throws(() => checkHeaders(['x-twice', '1', 'X-Twice', '2']), /given twice/)
})
