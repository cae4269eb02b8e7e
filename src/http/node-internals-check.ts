import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { connect, type AddressInfo, type Socket } from 'node:net'
import { checkHeaders } from './checked-headers.js'
import {
  connectionsFrom,
  internalsFrom,
  nodePieces,
  publicInternals,
  socketWritesOf,
  writeHeadHeld,
  writeHeadWithPairs,
  type Findings,
  type NodeInternals,
  type NodePieces,
  type WriteHolder,
} from './node-internals.js'

/**
 * The start-up check of node-internals.ts: each internal way is used, once, on a real
 * loopback connection to a server of its own, and what reaches the client is compared with
 * what the public way sends. A way is used by the node only if it did exactly what it is
 * used for:
 *
 * 1. `/held`: the connection's parser and answer are this request and its answer; the
 *    headers placed under `kOutHeaders` are the response's own (`getHeader` reads them) and
 *    leave as the very bytes of
 * 2. `/plain`: the same answer through `writeHead` with the pairs;
 * 3. `/held-writes`: the same answer again, its writes held (they reach the holder, not the
 *    socket) and then, the socket destroyed, made by net.Socket's own implementation before
 *    its own `_destroy` closes it: the client gets every byte, then the close.
 *
 * It takes a few milliseconds, once per process; a check that cannot run or finish (no
 * loopback, 30 s gone) leaves every way it did not confirm to the public API.
 */

const PAIRS = ['cache-control', 'no-store', 'X-Probe', 'held', 'content-type', 'text/plain; charset=utf-8']
const BODY = 'checked'
// Natively it takes milliseconds; under valgrind (bench/instructions.ts), seconds: a bound
// that such a run meets, and that only a check that hangs (a broken internal) reaches.
const CHECK_TIMEOUT_MS = 30_000

export async function checkNodeInternals(pieces: NodePieces): Promise<Findings> {
  const headers = checkHeaders([...PAIRS, 'content-length', String(BODY.length)])
  const writeHeld = pieces.outHeaders === undefined ? undefined : writeHeadHeld(pieces.outHeaders)
  const writes = pieces.writeGeneric === undefined || pieces.socketDestroy === undefined ? undefined : socketWritesOf(pieces.writeGeneric, pieces.socketDestroy)
  const connections = connectionsFrom(pieces)
  const found: Partial<Findings> = {
    headers: writeHeld === undefined ? 'no kOutHeaders symbol on OutgoingMessage' : undefined,
    writes: writes === undefined ? "net.Socket has no write implementation or destroy of its own to hold a socket's writes with" : undefined,
  }
  const seen = { headersHeld: false, connectionKnown: false, writesHeld: 0 }

  const heldWrites: Array<[boolean, unknown, string, (error?: Error | null) => void]> = []
  const holder: WriteHolder = {
    write(data, encoding, cb) {
      heldWrites.push([false, data, encoding, cb])
    },
    writev(chunks, cb) {
      heldWrites.push([true, chunks, '', cb])
    },
    destroy(error, cb) {
      for (const [writev, data, encoding, done] of heldWrites.splice(0)) writes!.make(this, writev, data, encoding, done)
      writes!.destroy(this, error, cb)
    },
  }

  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket
    response.sendDate = false
    if (request.url === '/held') {
      seen.connectionKnown = connections.requestOf(socket) === request && connections.responseOf(socket) === response
      ;(writeHeld ?? writeHeadWithPairs)(response, 200, headers)
      seen.headersHeld = response.getHeader('x-probe') === 'held'
      response.end(BODY)
    } else if (request.url === '/held-writes' && writes !== undefined) {
      writes.hold(socket, holder)
      writeHeadWithPairs(response, 200, headers)
      response.end(BODY)
      // after the answer's uncork (a tick), as a batch's end would be
      setImmediate(() => {
        seen.writesHeld = heldWrites.length
        socket.destroy()
      })
    } else {
      writeHeadWithPairs(response, 200, headers)
      response.end(BODY)
    }
  })
  let client: Socket | undefined
  try {
    await within(CHECK_TIMEOUT_MS, async () => {
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve))
      client = connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', noDelay: true })
      const answers = answersOf(client)
      const ask = (path: string) => client!.write(`GET ${path} HTTP/1.1\r\nHost: check\r\n\r\n`)
      ask('/held')
      const held = await answers.next()
      ask('/plain')
      const plain = await answers.next()
      found.connections = seen.connectionKnown ? connections : "the connection's parser and answer, as Node keeps them, are not the request and its answer"
      found.headers ??= !seen.headersHeld ? 'a response did not take the headers placed under kOutHeaders' : held !== plain ? 'the headers placed under kOutHeaders left as other bytes' : writeHeld
      if (writes === undefined) return
      ask('/held-writes')
      const heldThenClosed = await answers.rest()
      found.writes =
        seen.writesHeld === 0 ? "a socket's writes did not reach the methods that were to hold them" : heldThenClosed !== plain ? "held writes, made by net.Socket's own write before its own destroy, left as other bytes" : writes
    })
  } catch (error) {
    const why = `the check failed: ${(error as Error).message}`
    for (const need of ['headers', 'writes', 'connections'] as const) found[need] ??= why
  } finally {
    client?.destroy()
    server.closeAllConnections()
    server.close()
  }
  return found as Findings
}

/** The answers read off the client, one at a time (each `BODY` long), or whatever arrives until the close. */
function answersOf(socket: Socket) {
  let text = ''
  let closed = false
  let wake = () => {}
  socket.setEncoding('latin1')
  socket.on('data', (chunk: string) => ((text += chunk), wake()))
  socket.on('close', () => ((closed = true), wake()))
  socket.on('error', () => {})
  const until = (done: () => boolean) => new Promise<void>((resolve) => (wake = () => done() && resolve())).then(() => {}, () => {})
  return {
    async next(): Promise<string> {
      const whole = () => text.indexOf('\r\n\r\n') >= 0 && text.length >= text.indexOf('\r\n\r\n') + 4 + BODY.length
      if (!whole()) await until(() => whole() || closed)
      const length = text.indexOf('\r\n\r\n') + 4 + BODY.length
      const answer = text.slice(0, length)
      text = text.slice(length)
      return answer
    },
    async rest(): Promise<string> {
      if (!closed) await until(() => closed)
      return text
    },
  }
}

async function within(ms: number, run: () => Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  try {
    await Promise.race([run(), new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(`no end within ${ms / 1000} s`)), ms)))])
  } finally {
    clearTimeout(timer)
  }
}

// One check per process: what it finds holds for every node of the process.
let checked: Promise<Findings> | undefined

export interface NodeInternalsOptions {
  /** false (TEST_NODE_INTERNALS=false): the public API whatever the check finds */
  use: boolean
  log: { info(fields: object, message: string): void }
}

/** The node's ways: the check made once per process; logs which way each need takes. */
export async function nodeInternals({ use, log }: NodeInternalsOptions): Promise<NodeInternals> {
  const internals = use ? internalsFrom(await (checked ??= checkNodeInternals(nodePieces()))) : publicInternals('public API: not used (TEST_NODE_INTERNALS=false)')
  log.info({ node: process.version, nodeInternals: internals.ways }, "Node's internals: each used only where the start-up check found it behaving as expected")
  return internals
}
