/**
 * Issue 10, finding 1 (SPEC §7.3): a client that sends its request slowly holds a
 * connection for at most REQUEST_TIMEOUT, and however many do it, the node keeps answering
 * others. A real listening node with REQUEST_TIMEOUT=1 s; the only time bound asserted is a
 * generous one ("cut within a few seconds", where before the fix they were never cut).
 * Issue 40, point 8: the same bound round after round, for bodies that broke too, and
 * held by a deadline of our own where Node's check does not run.
 */
import { createServer } from 'node:http'
import { connect, type Socket } from 'node:net'
import t from 'tap'
import { createTenant, issueToken, startApp } from '../../support/helpers.js'
import { enforceRequestDeadlines } from '../../../src/http/request-deadline.js'

const REQUEST_TIMEOUT_S = 1
/** Generous: the timeout, Node's once-a-second check, and a loaded shared machine. */
const CUT_WITHIN_MS = 8000
const SLOW_CLIENTS = 150

const node = await startApp(t, { REQUEST_TIMEOUT: String(REQUEST_TIMEOUT_S), MAX_CONNECTIONS: '1000' })
const acme = await createTenant(node)
const issued = await issueToken(node, acme, 'patient-user')
await node.app.listen({ port: 0, host: '127.0.0.1' })
const port = (node.app.server.address() as { port: number }).port

interface SlowClient {
  socket: Socket
  closed: Promise<{ afterMs: number; answer: string }>
}

/** Opens a connection, writes `start`, then one piece of `trickle` every `everyMs` until it is closed. */
function slowClient(start: string, trickle: string, to = port, everyMs = 300, pieces: string[] = [...trickle]): SlowClient {
  const socket = connect(to, '127.0.0.1')
  const opened = Date.now()
  let answer = ''
  socket.setEncoding('utf8')
  socket.on('data', (chunk: string) => (answer += chunk))
  socket.on('error', () => {})
  let sent = 0
  if (start) socket.write(start)
  const timer = setInterval(() => {
    if (socket.writable && pieces.length > 0) socket.write(pieces[sent++ % pieces.length]!)
  }, everyMs)
  const closed = new Promise<{ afterMs: number; answer: string }>((resolve) =>
    socket.on('close', () => {
      clearInterval(timer)
      resolve({ afterMs: Date.now() - opened, answer })
    }),
  )
  t.teardown(() => {
    clearInterval(timer)
    socket.destroy()
  })
  return { socket, closed }
}

const kinds = {
  'a body that never finishes': () =>
    slowClient('POST /rest/v1/auth/token HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: 16000\r\n\r\n{', 'x'),
  'headers that never finish': () => slowClient('GET /rest/v1/auth/verify HTTP/1.1\r\nHost: gateway\r\n', 'X-Slow: yes\r\n'.repeat(100)),
  'a connection that sends nothing': () => slowClient('', ''),
}

async function verifyOnce(): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${port}/rest/v1/auth/verify`, { headers: { authorization: `Bearer ${issued.token}` } })
  await response.arrayBuffer()
  return response.status
}

t.test('many slow clients: verify still answers, and every slow one is cut at REQUEST_TIMEOUT', async (t) => {
  const clients: Array<[string, SlowClient]> = []
  for (let i = 0; i < SLOW_CLIENTS; i++) {
    const [kind, open] = Object.entries(kinds)[i % 3]!
    clients.push([kind, open()])
  }
  // While they are all held open, others are answered.
  for (let i = 0; i < 10; i++) t.equal(await verifyOnce(), 200, `verify answered while ${SLOW_CLIENTS} slow clients are connected`)

  const deadline = new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), CUT_WITHIN_MS + 2000).unref())
  const outcomes = await Promise.all(clients.map(([, client]) => Promise.race([client.closed, deadline])))
  const byKind = new Map<string, string[]>()
  outcomes.forEach((outcome, index) => {
    const kind = clients[index]![0]
    const verdict = outcome === 'still open' ? 'still open' : outcome.afterMs <= CUT_WITHIN_MS ? 'cut in time' : `cut after ${outcome.afterMs} ms`
    byKind.set(kind, [...(byKind.get(kind) ?? []), verdict])
  })
  for (const [kind, verdicts] of byKind) t.same([...new Set(verdicts)], ['cut in time'], kind)
  const answered = outcomes.flatMap((outcome) => (outcome !== 'still open' && outcome.answer !== '' ? [outcome] : []))
  t.same(
    [...new Set(answered.map((outcome) => outcome.answer.split('\r\n')[0]))],
    answered.length ? ['HTTP/1.1 408 Request Timeout'] : [],
    'a slow request that gets an answer gets 408',
  )

  t.equal(await verifyOnce(), 200, 'and the node answers afterwards')
})

t.test('MAX_CONNECTIONS caps what one node holds open', async (t) => {
  const capped = await startApp(t, { MAX_CONNECTIONS: '20', REQUEST_TIMEOUT: '30' })
  await capped.app.listen({ port: 0, host: '127.0.0.1' })
  const cappedPort = (capped.app.server.address() as { port: number }).port
  const sockets: Socket[] = []
  t.teardown(() => sockets.forEach((socket) => socket.destroy()))
  const open = async () => {
    const socket = connect(cappedPort, '127.0.0.1')
    socket.on('error', () => {})
    sockets.push(socket)
    await new Promise((resolve) => socket.once('connect', resolve))
    return socket
  }
  for (let i = 0; i < 20; i++) await open()
  // Node accepts and immediately closes a connection over the cap.
  const extra = await open()
  const closed = await Promise.race([new Promise((resolve) => extra.once('close', () => resolve(true))), new Promise((resolve) => setTimeout(() => resolve(false), 5000))])
  t.equal(closed, true, 'the 21st connection is closed by the node')
})

t.test('issue 40, point 8: every slow body is cut at REQUEST_TIMEOUT, round after round, with or without ordinary requests before', async (t) => {
  // REQUEST_TIMEOUT 2 s; each connection must be cut (408, or closed) within 2 s + MARGIN_MS
  // of its opening. Before the fix, a body whose parse failed (a broken chunk) and whose
  // client kept sending was never cut: Node's check reported it once, our clientError
  // handler had already left that connection to its route, and the route waited for a
  // body that never ended while each byte kept the idle timer from firing.
  const TIMEOUT_S = 2
  const MARGIN_MS = 3000
  const PER_KIND = 50
  const slow = await startApp(t, { REQUEST_TIMEOUT: String(TIMEOUT_S), MAX_CONNECTIONS: '2000' })
  const tenant = await createTenant(slow, 'Rounds')
  await slow.app.listen({ port: 0, host: '127.0.0.1' })
  const base = `http://127.0.0.1:${(slow.app.server.address() as { port: number }).port}`
  const slowPort = (slow.app.server.address() as { port: number }).port
  const token = (body: Record<string, string>) =>
    fetch(`${base}/rest/v1/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keyId: tenant.keyId, userId: 'ordinary', ...body }) })
  const ordinary = async (): Promise<number[]> => {
    const issued = await token({ keySecret: tenant.keySecret })
    const { token: jwt } = (await issued.json()) as { token: string }
    const verified = await fetch(`${base}/rest/v1/auth/verify`, { headers: { authorization: `Bearer ${jwt}` } })
    await verified.arrayBuffer()
    const refused = await token({ keySecret: 'wrong' })
    await refused.arrayBuffer()
    return [issued.status, verified.status, refused.status]
  }
  const head = (transfer: string) => `POST /rest/v1/auth/token HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\n${transfer}\r\n\r\n`
  const slowKinds: Record<string, () => SlowClient> = {
    // the shape of the report: 16,000 bytes announced, one sent every half second
    'a Content-Length body, dripped': () => slowClient(head('Content-Length: 16000') + '{', 'x', slowPort, 500),
    'a chunked body, dripped': () => slowClient(head('Transfer-Encoding: chunked'), '', slowPort, 500, ['1\r\nx\r\n']),
    'a chunked body that broke, then dripped': () => slowClient(head('Transfer-Encoding: chunked') + '1\r\n{\r\nzz\r\n', 'x', slowPort, 500),
  }
  for (const [round, before] of [[1, false], [2, true], [3, true]] as const) {
    if (before) t.same(await ordinary(), [200, 200, 401], `round ${round}: ordinary requests before (issue, verify, a wrong secret)`)
    const clients = Object.entries(slowKinds).flatMap(([kind, open]) => Array.from({ length: PER_KIND }, () => [kind, open()] as const))
    t.same(await ordinary(), [200, 200, 401], `round ${round}: answered while ${clients.length} slow clients are connected`)
    const deadline = new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), TIMEOUT_S * 1000 + MARGIN_MS + 2000).unref())
    const outcomes = await Promise.all(clients.map(([, client]) => Promise.race([client.closed, deadline])))
    // those the node left open are closed here, so that the next round starts clean
    for (const [, client] of clients) client.socket.destroy()
    const verdicts = new Map<string, Set<string>>()
    outcomes.forEach((outcome, index) => {
      const verdict =
        outcome === 'still open'
          ? 'still open'
          : outcome.afterMs > TIMEOUT_S * 1000 + MARGIN_MS
            ? 'cut late'
            : outcome.answer === '' || outcome.answer.startsWith('HTTP/1.1 408 Request Timeout\r\n')
              ? 'cut in time'
              : `answered ${outcome.answer.split('\r\n')[0]}`
      const kind = clients[index]![0]
      verdicts.set(kind, (verdicts.get(kind) ?? new Set()).add(verdict))
    })
    for (const [kind, seen] of verdicts) t.same([...seen], ['cut in time'], `round ${round}: ${kind}: 408 or closed within ${TIMEOUT_S} s + ${MARGIN_MS} ms`)
  }
  t.same(await ordinary(), [200, 200, 401], 'and the node answers afterwards')
})

t.test("our own deadline cuts a slow body where Node's check does not run", async (t) => {
  // A bare Node server whose own check never comes (requestTimeout 0, a sweep once an hour),
  // with the deadline of src/http/request-deadline.ts at 1 s: the cut is ours alone.
  const server = createServer({ requestTimeout: 0, headersTimeout: 0, connectionsCheckingInterval: 3_600_000 }, (request, response) => {
    request.resume()
    request.on('end', () => response.end('whole'))
  })
  const reported: string[] = []
  server.on('clientError', (error: Error & { code?: string }, socket: Socket) => {
    reported.push(error.code ?? error.message)
    socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n')
  })
  enforceRequestDeadlines(server, 1000)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => server.close(resolve)))
  const barePort = (server.address() as { port: number }).port
  const client = slowClient('POST /upload HTTP/1.1\r\nHost: bare\r\nContent-Length: 1000\r\n\r\n', 'x', barePort, 200)
  const whole = await fetch(`http://127.0.0.1:${barePort}/upload`, { method: 'POST', body: 'all at once' })
  t.equal(await whole.text(), 'whole', 'a body sent at once is not cut')
  const outcome = await Promise.race([client.closed, new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), 6000).unref())])
  client.socket.destroy()
  if (outcome === 'still open') return t.fail('the slow body was never cut')
  t.equal(outcome.answer.split('\r\n')[0], 'HTTP/1.1 408 Request Timeout')
  t.ok(outcome.afterMs < 1000 + 3000, `cut ${outcome.afterMs} ms after it began (the timeout 1 s, a margin of 3 s)`)
  t.same(reported, ['ERR_HTTP_REQUEST_TIMEOUT'], 'reported once, as Node reports its own timeouts')
})
