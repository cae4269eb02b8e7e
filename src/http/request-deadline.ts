import type { IncomingMessage, Server } from 'node:http'
import type { Socket } from 'node:net'

/**
 * SPEC §7.3, a bound of our own: a request whose body is not whole REQUEST_TIMEOUT after the
 * request began is cut as Node's own check cuts it (a `clientError` with
 * ERR_HTTP_REQUEST_TIMEOUT: 408, or a close once an answer has begun; client-errors.ts).
 *
 * Why, beside Node's check (the `connectionsCheckingInterval` sweep of its parsers): that
 * check hands each expired request to the `clientError` handler once and forgets it, and
 * the request is never looked at again: a body whose parse failed (a broken chunk) was
 * left to its route, which waits for a body that never ends, and every byte the client
 * then sent kept the connection's idle timer from firing, so the connection stayed open
 * for as long as the client dripped. Here a request is looked at until its body is whole
 * or its connection is gone.
 *
 * The first request of a connection is counted from the connection (the client holds it
 * from then on), the next ones from their headers (which Node's check bounds). Bodiless
 * requests (verify calls) are never tracked; a body request costs a Map entry until the
 * next sweep.
 */
export function enforceRequestDeadlines(server: Server, timeoutMs: number): void {
  const connectedAt = new WeakMap<Socket, number>()
  const pending = new Map<IncomingMessage, number>()
  server.on('connection', (socket: Socket) => connectedAt.set(socket, Date.now()))
  server.on('request', (request: IncomingMessage) => {
    const { headers, socket } = request
    // the connection's time counts for its first request only
    const connected = connectedAt.get(socket)
    if (connected !== undefined) connectedAt.delete(socket)
    if (headers['content-length'] === undefined && headers['transfer-encoding'] === undefined) return
    pending.set(request, (connected ?? Date.now()) + timeoutMs)
  })
  const sweep = setInterval(() => {
    const now = Date.now()
    for (const [request, deadline] of pending) {
      if (request.complete || request.socket.destroyed) pending.delete(request)
      else if (now >= deadline) {
        pending.delete(request)
        server.emit('clientError', requestTimeout(), request.socket)
      }
    }
  }, sweepEveryMs(timeoutMs))
  sweep.unref()
  server.on('close', () => clearInterval(sweep))
}

/** Often enough that a request is cut within a fraction of the timeout past it; at most once a second. */
function sweepEveryMs(timeoutMs: number): number {
  return Math.max(50, Math.min(1000, Math.floor(timeoutMs / 4)))
}

/** The error Node's own check reports. */
function requestTimeout(): Error & { code: string } {
  return Object.assign(new Error('Request timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' })
}
