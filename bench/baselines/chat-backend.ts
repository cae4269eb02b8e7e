/**
 * The chat backend of the proxy scenario (bench/lib/proxies.ts): the smallest Node HTTP
 * server, behind every proxy path alike, so that "nginx alone" and "nginx auth_request"
 * differ only by the verify call. It answers 200 with the user id the proxy gave it
 * (`x-auth-user-id`, empty when none): the load generator checks it against the token it
 * sent, so an identity that is missing, forged or someone else's is a wrong answer.
 *
 *   node dist/bench/baselines/chat-backend.js      env: PORT, HOST
 */
import { createServer } from 'node:http'

const server = createServer((request, response) => {
  // A request body is read and dropped, as a backend that has no use for it would.
  request.resume()
  request.on('end', () => {
    const userId = request.headers['x-auth-user-id']
    const body = typeof userId === 'string' ? userId : ''
    response.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) })
    response.end(body)
  })
})
server.keepAliveTimeout = 60_000
server.listen(Number(process.env.PORT ?? 3200), process.env.HOST ?? '127.0.0.1')
// The kit's children exit when their IPC channel closes (bench/lib/procs.ts).
process.on('disconnect', () => process.exit(0))
