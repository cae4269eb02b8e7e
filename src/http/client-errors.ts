import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { BEARER_CHALLENGE, denialBody, denials, errors, type ErrorBody } from '../errors.js'
import { body } from './error-handler.js'
import { VERIFY_PATH } from '../routes/verify.js'
import { JSON_CONTENT_TYPE } from '../json-text.js'

/**
 * What Node's HTTP parser refuses before Fastify sees a request: headers over
 * MAX_HEADER_SIZE, a malformed request, a request not received in time.
 *
 * The verify endpoint answers only 200, 401 or 503 (a proxy turns anything else into a
 * 500), so a refused request for the verify path is denied: 401 with the SPEC's denial
 * body, as a token the node could not read. Node reports only the packet that failed,
 * and the request line may have come in an earlier one: a request whose path cannot be
 * read is treated as a verify call too (a 401 to a refused request of another route is
 * still a refusal; a 431 to a proxy's verify call is a 500 for its client). Other routes
 * get 431, 400 or 408 with the SPEC's error body.
 */
export function answerClientError(this: FastifyInstance, error: ClientError, socket: Socket): void {
  // A reset connection has nobody to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  // SPEC §7.3: a request not whole within REQUEST_TIMEOUT gets 408 and its connection is
  // closed, even after an earlier error left it to its route (a broken body: the route
  // waits for a body that never ends). One already answered here is closing (respond).
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    if (socket.writableEnded) return
    answered.add(socket)
    this.log.debug({ err: error }, 'client error')
    if ((socket as ServerSocket)._httpMessage?.headersSent) return void socket.destroy()
    return respond(socket, 408, {}, body(errors.requestTimeout()))
  }
  // A second error on an answered connection changes nothing.
  if (answered.has(socket)) return
  answered.add(socket)
  this.log.debug({ err: error }, 'client error')
  const { parser, _httpMessage: response } = socket as ServerSocket
  // A body that went wrong after its headers were read: the route decides that request, and
  // the connection ends with its answer (nothing is written after it).
  if (parser?.incoming && !parser.incoming.complete) {
    if (response && !response.headersSent) response.shouldKeepAlive = false
    else socket.destroy()
    return
  }
  const path = failedRequestPath(error)
  if (path === undefined || isVerifyPath(path)) return respond(socket, 401, { ...BEARER_CHALLENGE, 'cache-control': 'no-store' }, denialBody(denials.invalidToken))
  const apiError = error.code === 'HPE_HEADER_OVERFLOW' ? errors.headersTooLarge() : errors.malformedRequest()
  respond(socket, apiError.statusCode, {}, body(apiError))
}

export interface ClientError extends Error {
  code?: string
  /** the packet Node's parser failed on (typed loosely by Fastify) */
  rawPacket?: unknown
  bytesParsed?: number
}

/** What Node's HTTP server keeps on a connection's socket: its parser and the answer in progress. */
type ServerSocket = Socket & { parser?: { incoming?: IncomingMessage | null } | null; _httpMessage?: ServerResponse | null }

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

function isVerifyPath(target: string): boolean {
  if (!target.startsWith(VERIFY_PATH)) return false
  const next = target.charAt(VERIFY_PATH.length)
  return next === '' || next === '/' || next === ';' || next === '?' || next === '#'
}
