import { connect, type Socket } from 'node:net'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { createTenant, issueToken, startApp, type TestApp } from '../../support/helpers.js'
import { waitFor } from '../../support/poll.js'

/**
 * HTTP_WRITE_BATCHING (src/http/write-batching.ts): the answers of one event-loop turn are
 * written together at its end. Through a real listening node: an answer made in a turn has
 * not reached the socket before the turn ends and has after; every answer still arrives,
 * whole and in order, over many connections each pipelining many requests (a large answer
 * among them, written in more than one go); a client that hangs up before its answer leaves
 * harms no one; `false` writes each answer at once.
 */

async function listening(t: Test, env: Record<string, string> = {}): Promise<{ node: TestApp; port: number }> {
  // batching holds a socket's writes through Node's internals: this file is about that way,
  // whatever the run's TEST_NODE_INTERNALS (test/in-process/verify/node-internals.test.ts compares the two)
  const node = await startApp(t, { TEST_NODE_INTERNALS: 'true', ...env })
  await node.app.listen({ port: 0, host: '127.0.0.1' })
  return { node, port: (node.app.server.address() as AddressInfo).port }
}

interface SeenAnswer {
  ended: boolean
  pendingInTurn: number
  pendingAfter?: number
}

/** After Fastify's own listener: what the socket holds at the end of the handler's turn, and at the end of the turn after. */
function watchAnswers(node: TestApp): SeenAnswer[] {
  const seen: SeenAnswer[] = []
  node.app.server.on('request', (_request: IncomingMessage, response: ServerResponse) => {
    const entry: SeenAnswer = { ended: response.writableEnded, pendingInTurn: response.socket!.writableLength }
    seen.push(entry)
    setImmediate(() => setImmediate(() => (entry.pendingAfter = response.socket?.writableLength ?? 0)))
  })
  return seen
}

/** Sends `raw` on a new connection and reads `count` answers off it (status and body each). */
async function exchange(port: number, raw: string, count: number): Promise<Array<{ status: number; body: string }>> {
  const socket = connect(port, '127.0.0.1')
  const answers: Array<{ status: number; body: string }> = []
  let buffer = Buffer.alloc(0)
  return new Promise((resolve, reject) => {
    socket.on('error', reject)
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      for (;;) {
        const end = buffer.indexOf('\r\n\r\n')
        if (end < 0) break
        const head = buffer.subarray(0, end).toString('latin1')
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0)
        if (buffer.length < end + 4 + length) break
        answers.push({ status: Number(head.slice(9, 12)), body: buffer.subarray(end + 4, end + 4 + length).toString('utf8') })
        buffer = buffer.subarray(end + 4 + length)
      }
      if (answers.length === count) {
        socket.end()
        resolve(answers)
      }
    })
    socket.write(raw)
  })
}

const verifyRequest = (token: string | undefined) => `GET /rest/v1/auth/verify HTTP/1.1\r\nhost: x\r\n${token ? `authorization: Bearer ${token}\r\n` : ''}\r\n`

t.test('an answer made in a turn reaches the socket at the end of that turn', async (t) => {
  const { node, port } = await listening(t)
  const seen = watchAnswers(node)
  const [answer] = await exchange(port, verifyRequest(undefined), 1)
  t.equal(answer!.status, 401, 'no token: refused, at once (no store read)')
  await waitFor('the turn after', () => seen[0]?.pendingAfter !== undefined)
  t.equal(seen[0]!.ended, true, 'the handler ended its answer in its turn')
  t.ok(seen[0]!.pendingInTurn > 0, `still queued at the end of the handler's turn (${seen[0]!.pendingInTurn} bytes)`)
  t.equal(seen[0]!.pendingAfter, 0, 'written once the turn ended')
})

t.test('HTTP_WRITE_BATCHING=false: each answer is written as it is ended', async (t) => {
  const { node, port } = await listening(t, { HTTP_WRITE_BATCHING: 'false' })
  const seen = watchAnswers(node)
  const [answer] = await exchange(port, verifyRequest(undefined), 1)
  t.equal(answer!.status, 401)
  t.equal(seen[0]!.ended, true)
  t.equal(seen[0]!.pendingInTurn, 0, 'nothing left queued in the handler’s turn')
})

t.test('many connections, each pipelining many requests and a large answer: every answer whole, in order', async (t) => {
  const { node, port } = await listening(t)
  const tenant = await createTenant(node, 'Acme')
  const { token } = await issueToken(node, tenant, 'alice')
  const openapi = await node.inject({ method: 'GET', url: '/openapi.json' })
  t.ok(openapi.body.length > 64 * 1024, `a large answer (${openapi.body.length} bytes): more than one write of the socket`)
  const plan = (c: number) => Array.from({ length: 40 }, (_, i) => (i === 20 ? 'openapi' : (i + c) % 3 === 0 ? 'refused' : 'allowed'))
  const connections = await Promise.all(
    Array.from({ length: 20 }, (_, c) => {
      const steps = plan(c)
      const raw = steps.map((step) => (step === 'openapi' ? 'GET /openapi.json HTTP/1.1\r\nhost: x\r\n\r\n' : verifyRequest(step === 'allowed' ? token : token + 'x'))).join('')
      return exchange(port, raw, steps.length).then((answers) => ({ steps, answers }))
    }),
  )
  let wrong = 0
  for (const { steps, answers } of connections) {
    steps.forEach((step, i) => {
      const answer = answers[i]!
      const ok = step === 'openapi' ? answer.status === 200 && answer.body === openapi.body : step === 'allowed' ? answer.status === 200 && JSON.parse(answer.body).user.externalId === 'alice' : answer.status === 401
      if (!ok) wrong++
    })
  }
  t.equal(wrong, 0, '800 answers over 20 connections, each the answer to its own request')
})

t.test('clients that hang up before their answers are written harm no one', async (t) => {
  const { node, port } = await listening(t)
  const tenant = await createTenant(node, 'Acme')
  const { token } = await issueToken(node, tenant, 'bob')
  for (let round = 0; round < 5; round++) {
    const quitters: Socket[] = []
    for (let i = 0; i < 20; i++) {
      const socket = connect(port, '127.0.0.1')
      socket.on('error', () => {})
      socket.write(verifyRequest(token).repeat(5), () => socket.destroy())
      quitters.push(socket)
    }
    const answers = await exchange(port, verifyRequest(token).repeat(10), 10)
    t.equal(answers.filter((a) => a.status === 200).length, 10, `round ${round + 1}: a client beside them gets all its answers`)
  }
  const health = await node.inject({ method: 'GET', url: '/healthz' })
  t.equal(health.statusCode, 200, 'the node still answers')
  t.strictSame(node.logs.filter((line) => /"level":(50|60)/.test(line)), [], 'nothing logged as an error')
})
