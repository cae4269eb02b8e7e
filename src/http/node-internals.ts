import { OutgoingMessage, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { Socket } from 'node:net'
import type { CheckedHeaders } from './checked-headers.js'

/**
 * The one door to what Node keeps private. Three hot or delicate paths are cheaper or only
 * possible through it:
 *
 * - headers checked once (checked-headers.ts) placed under the symbol `kOutHeaders`, where
 *   a response keeps what `setHeader` already checked, instead of handed to `writeHead` to be
 *   checked again on every answer (~5 % of a verification's instructions);
 * - a socket's `_write`/`_writev`/`_destroy` replaced and net.Socket's `_writeGeneric`
 *   called, so that the answers of one event-loop turn leave together (write-batching.ts);
 * - the request a connection's parser is reading (`socket.parser.incoming`) and the answer
 *   it is writing (`socket._httpMessage`), for what Node's parser refuses (client-errors.ts).
 *
 * None of these is Node's public API. At start-up each is checked by using it on a real
 * loopback connection against the public way (node-internals-check.ts): only what behaves
 * exactly as expected is used; anything missing or different falls back to the public API
 * (`writeHead` with the pairs; each answer written as it is ready; the requests and answers
 * followed through the server's `request` events), and the node logs once which way it took.
 * Nothing else in src/ touches Node's internals (test/unit/architecture.test.ts).
 */

type Callback = (error?: Error | null) => void
type WriteGeneric = (this: Socket, writev: boolean, data: unknown, encoding: string, cb: Callback) => void
type SocketDestroy = (this: Socket, error: Error | null, cb: Callback) => void

/** What a socket of Node's HTTP server holds besides its public API. */
interface PrivateSocket {
  _write?: unknown
  _writev?: unknown
  _destroy?: unknown
  _writeGeneric?: unknown
  parser?: { incoming?: IncomingMessage | null } | null
  _httpMessage?: ServerResponse | null
}

/** Node's private pieces, as found on this Node (a test hands the check other ones). */
export interface NodePieces {
  /** the symbol under which an OutgoingMessage keeps its headers: lower-case name → [name, value] */
  outHeaders: symbol | undefined
  /** net.Socket's write implementation, behind both its `_write` and its `_writev` */
  writeGeneric: WriteGeneric | undefined
  /** net.Socket's `_destroy`, which closes the handle */
  socketDestroy: SocketDestroy | undefined
  /** the request the connection's parser is reading */
  requestOf(socket: Socket): IncomingMessage | null | undefined
  /** the answer the connection is writing */
  responseOf(socket: Socket): ServerResponse | null | undefined
}

export function nodePieces(): NodePieces {
  const socket = Socket.prototype as unknown as PrivateSocket
  return {
    outHeaders: Object.getOwnPropertySymbols(new OutgoingMessage()).find((symbol) => symbol.description === 'kOutHeaders'),
    writeGeneric: typeof socket._writeGeneric === 'function' ? (socket._writeGeneric as WriteGeneric) : undefined,
    socketDestroy: typeof socket._destroy === 'function' ? (socket._destroy as SocketDestroy) : undefined,
    requestOf: (socket) => (socket as unknown as PrivateSocket).parser?.incoming,
    responseOf: (socket) => (socket as unknown as PrivateSocket)._httpMessage,
  }
}

/** `writeHead(status)` with headers checked once. */
export type WriteCheckedHead = (response: ServerResponse, status: number, headers: CheckedHeaders) => void

/** The public way: Node checks the pairs again. */
export const writeHeadWithPairs: WriteCheckedHead = (response, status, headers) => void response.writeHead(status, headers.pairs as string[])

/** The headers placed where the response keeps those it already checked; `writeHead` with the pairs when it holds some of its own. */
export function writeHeadHeld(outHeaders: symbol): WriteCheckedHead {
  return (response, status, headers) => {
    const holder = response as unknown as Record<symbol, unknown>
    if (holder[outHeaders] === null) {
      holder[outHeaders] = headers.held
      response.writeHead(status)
    } else {
      response.writeHead(status, headers.pairs as string[])
    }
  }
}

/** A socket's writes held by someone else (write-batching.ts): its `_write`, `_writev` and `_destroy` while it holds them. */
export interface WriteHolder {
  write(this: Socket, data: unknown, encoding: BufferEncoding, cb: Callback): void
  writev(this: Socket, chunks: Array<{ chunk: unknown; encoding: BufferEncoding }>, cb: Callback): void
  /** must make the writes it holds for the socket (`make`), then `destroy` it */
  destroy(this: Socket, error: Error | null, cb: Callback): void
}

export interface SocketWrites {
  hold(socket: Socket, holder: WriteHolder): void
  holds(socket: Socket, holder: WriteHolder): boolean
  /** net.Socket's own methods again */
  release(socket: Socket): void
  /** a held write, made as net.Socket makes it */
  make(socket: Socket, writev: boolean, data: unknown, encoding: string, cb: Callback): void
  /** net.Socket's own `_destroy` */
  destroy(socket: Socket, error: Error | null, cb: Callback): void
}

export function socketWritesOf(writeGeneric: WriteGeneric, socketDestroy: SocketDestroy): SocketWrites {
  return {
    hold(socket, holder) {
      const own = socket as unknown as PrivateSocket
      own._write = holder.write
      own._writev = holder.writev
      own._destroy = holder.destroy
    },
    holds: (socket, holder) => (socket as unknown as PrivateSocket)._write === holder.write,
    release(socket) {
      // The own properties gone, the prototype's (net.Socket's) methods answer again.
      const own = socket as unknown as PrivateSocket
      delete own._write
      delete own._writev
      delete own._destroy
    },
    make: (socket, writev, data, encoding, cb) => writeGeneric.call(socket, writev, data, encoding, cb),
    destroy: (socket, error, cb) => socketDestroy.call(socket, error, cb),
  }
}

/** What a connection is doing: the request its parser reads, the answer it writes. */
export interface Connections {
  requestOf(socket: Socket): IncomingMessage | undefined
  responseOf(socket: Socket): ServerResponse | undefined
  /** what the public way needs to know them: the server's requests followed */
  watch(server: Server): void
}

export function connectionsFrom(pieces: Pick<NodePieces, 'requestOf' | 'responseOf'>): Connections {
  return { requestOf: (socket) => pieces.requestOf(socket) ?? undefined, responseOf: (socket) => pieces.responseOf(socket) ?? undefined, watch: () => {} }
}

/**
 * The public way: each request the server hands on, followed until its answer finishes. The
 * answer being written is the first unfinished one the socket was given (answers leave in
 * order); the request being read, the last one that arrived.
 */
export function followedConnections(): Connections {
  const latest = new WeakMap<Socket, IncomingMessage>()
  const answering = new WeakMap<Socket, ServerResponse[]>()
  return {
    requestOf: (socket) => latest.get(socket),
    responseOf: (socket) => answering.get(socket)?.find((response) => response.socket === socket),
    watch(server) {
      server.on('request', (request: IncomingMessage, response: ServerResponse) => {
        const socket = request.socket
        latest.set(socket, request)
        let answers = answering.get(socket)
        if (answers === undefined) answering.set(socket, (answers = []))
        answers.push(response)
        const done = () => {
          const at = answers.indexOf(response)
          if (at >= 0) answers.splice(at, 1)
        }
        response.once('finish', done)
        response.once('close', done)
      })
    },
  }
}

/** What the start-up check found for each need: the internal way, which behaved as expected, or why not. */
export interface Findings {
  headers: WriteCheckedHead | string
  writes: SocketWrites | string
  connections: Connections | string
}

// The connections of each server, as its node knows them (app.ts): what Node's parser refuses
// is answered by a handler Fastify is given before the node is assembled (client-errors.ts).
const serving = new WeakMap<Server, Connections>()

/** The server's connections known by `connections` from now on (followed, on the public way). */
export function serveConnections(server: Server, connections: Connections): void {
  connections.watch(server)
  serving.set(server, connections)
}

/** How the server's node knows its connections; undefined before the node is assembled. */
export function connectionsOf(server: Server): Connections | undefined {
  return serving.get(server)
}

/** What a node uses, each need met by Node's internals where the start-up check passed. */
export interface NodeInternals {
  /** for each need, "internal" or the reason for the public way: what the node logged */
  readonly ways: Readonly<Record<keyof Findings, string>>
  readonly writeHead: WriteCheckedHead
  /** undefined: a socket's writes cannot be held, each answer is written as it is ready */
  readonly socketWrites: SocketWrites | undefined
  readonly connections: Connections
}

/** Node's public API only. */
export function publicInternals(why: string): NodeInternals {
  return { ways: { headers: why, writes: why, connections: why }, writeHead: writeHeadWithPairs, socketWrites: undefined, connections: followedConnections() }
}

export function internalsFrom(findings: Findings): NodeInternals {
  const way = (found: unknown) => (typeof found === 'string' ? `public API: ${found}` : 'internal')
  return {
    ways: { headers: way(findings.headers), writes: way(findings.writes), connections: way(findings.connections) },
    writeHead: typeof findings.headers === 'string' ? writeHeadWithPairs : findings.headers,
    socketWrites: typeof findings.writes === 'string' ? undefined : findings.writes,
    connections: typeof findings.connections === 'string' ? followedConnections() : findings.connections,
  }
}
