import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { errors, type ErrorBody } from '../errors.js'
import { body } from './error-handler.js'
import { JSON_CONTENT_TYPE } from '../json-text.js'
import { connectionsOf } from './node-internals.js'

/** An answer written on the socket itself: Node's parser refused the request, Fastify never saw it. */
export interface RawAnswer {
  status: 401
  headers: Record<string, string>
  body: ErrorBody
}

/**
 * What a route answers, instead of 431, 400 or 408, to a request Node's parser refused, by
 * the target of that request (undefined: it could not be read); undefined: no answer of its
 * own. The verify endpoint's (routes/verify/refused.ts): a 401, since a proxy turns anything
 * else into a 500.
 */
export type RefusedRequestAnswer = (target: string | undefined) => RawAnswer | undefined

/**
 * What Node's HTTP parser refuses before Fastify sees a request: headers over
 * MAX_HEADER_SIZE, a malformed request, a request not received in time. Node reports only
 * the packet that failed, and the request line may have come in an earlier one: the target
 * is read from it when it can be (`refusedAnswer` decides with undefined otherwise). Other
 * requests get 431, 400 or 408 with the SPEC's error body. The request the connection is
 * reading and the answer it is writing: as the server's node knows them (node-internals.ts).
 */
export function clientErrorAnswerer(refusedAnswer: RefusedRequestAnswer) {
  return function answerClientError(this: FastifyInstance, error: ClientError, socket: Socket): void {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return
    const connections = connectionsOf(this.server) ?? UNKNOWN
    // SPEC §7.3: a request not whole within REQUEST_TIMEOUT gets 408 and its connection is
    // closed, even after an earlier error left it to its route (a broken body: the route
    // waits for a body that never ends). One already answered here is closing (respond).
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      if (socket.writableEnded) return
      answered.add(socket)
      this.log.debug({ err: error }, 'client error')
      if (connections.responseOf(socket)?.headersSent) return void socket.destroy()
      return respond(socket, 408, {}, body(errors.requestTimeout()))
    }
    // A second error on an answered connection changes nothing.
    if (answered.has(socket)) return
    answered.add(socket)
    this.log.debug({ err: error }, 'client error')
    const request = connections.requestOf(socket)
    // A body that went wrong after its headers were read: the route decides that request, and
    // the connection ends with its answer (nothing is written after it).
    if (request !== undefined && !request.complete) {
      const response = connections.responseOf(socket)
      if (response && !response.headersSent) response.shouldKeepAlive = false
      else socket.destroy()
      return
    }
    const own = refusedAnswer(failedRequestPath(error))
    if (own !== undefined) return respond(socket, own.status, own.headers, own.body)
    const apiError = error.code === 'HPE_HEADER_OVERFLOW' ? errors.headersTooLarge() : errors.malformedRequest()
    respond(socket, apiError.statusCode, {}, body(apiError))
  }
}

export interface ClientError extends Error {
  code?: string
  /** the packet Node's parser failed on (typed loosely by Fastify) */
  rawPacket?: unknown
  bytesParsed?: number
}

/** before the node is assembled: no request read, no answer written */
const UNKNOWN = { requestOf: () => undefined, responseOf: () => undefined }

/** connections answered by this handler, or left to their route's answer */
const answered = new WeakSet<Socket>()
/** how long a refused client may keep sending after its answer before the connection is cut */
const LINGER_MS = 2000
const REASONS: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 408: 'Request Timeout', 431: 'Request Header Fields Too Large' }

/**
 * Writes the answer and closes the sending side, but keeps reading a while: closing a
 * socket with unread input resets it, and the client (a proxy still sending its headers)
 * would see the reset instead of the answer.
 */
function respond(socket: Socket, status: number, headers: Record<string, string>, answer: ErrorBody): void {
  const payload = JSON.stringify(answer)
  const lines = [`HTTP/1.1 ${status} ${REASONS[status]}`, `content-type: ${JSON_CONTENT_TYPE}`, `content-length: ${Buffer.byteLength(payload)}`, 'connection: close']
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`)
  if (!socket.writable) return void socket.destroy()
  socket.end(lines.join('\r\n') + '\r\n\r\n' + payload)
  const cut = setTimeout(() => socket.destroy(), LINGER_MS)
  cut.unref()
  socket.once('close', () => clearTimeout(cut))
}

/** RFC 9112 request line: method, target, version. */
const REQUEST_LINE = /(?:^|\n)[!#$%&'*+.^_`|~0-9A-Za-z-]+ +(\S+) +HTTP\/\d\.\d\r?\n/g

/** The target of the request that failed: the last request line the failing packet holds before the failure. */
function failedRequestPath(error: ClientError): string | undefined {
  const packet = error.rawPacket
  if (!Buffer.isBuffer(packet)) return undefined
  const end = typeof error.bytesParsed === 'number' ? Math.min(packet.length, error.bytesParsed + 1) : packet.length
  let target: string | undefined
  for (const match of packet.toString('latin1', 0, end).matchAll(REQUEST_LINE)) target = match[1]
  // An absolute-form target (`GET http://host/path`) names its path after the authority.
  return target?.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '')
}
