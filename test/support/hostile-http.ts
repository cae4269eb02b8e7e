import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * Real node:http servers that answer the way a misconfigured or hostile hop does (a redirect
 * to another origin, an answer without end), for the client's and the CLI's tests: each one
 * records every request it took, body included, so a test can say what reached it.
 */

/** One request a server took. */
export interface Seen {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: string
}

export interface HostileServer {
  readonly url: string
  readonly origin: string
  readonly seen: Seen[]
  close(): Promise<void>
}

type Answer = (request: IncomingMessage, response: ServerResponse, seen: Seen) => void

/** A server on a free port of 127.0.0.1 that answers each request, once its body is in, with `answer`. */
export async function hostileServer(answer: Answer): Promise<HostileServer> {
  const seen: Seen[] = []
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const entry = { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8') }
      seen.push(entry)
      answer(request, response, entry)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url: origin,
    origin,
    seen,
    close: () => {
      server.closeAllConnections()
      return new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** Answers `status` with `Location: location` and a small JSON body (what a load balancer might). */
export const redirectTo =
  (status: number, location: string | ((seen: Seen) => string)): Answer =>
  (_request, response, seen) =>
    response.writeHead(status, { location: typeof location === 'string' ? location : location(seen), 'content-type': 'application/json' }).end('{"moved":true}')

/** Answers 200 with a JSON body, for a server that stands in for whatever a redirect points at. */
export const answerJson =
  (status: number, body: unknown, headers: Record<string, string> = {}): Answer =>
  (_request, response) =>
    response.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body))

/**
 * Writes `total` bytes of `a` into `response` (its head already written), as fast as the
 * peer takes them, and resolves with how many bytes reached the kernel before the peer hung
 * up (or all of them, and then the answer ends). `cut`: destroy the connection after the
 * last byte instead of ending the answer (a Content-Length larger than what is sent).
 */
export function writeBytes(response: ServerResponse, total: number, options: { cut?: boolean } = {}): Promise<number> {
  const chunk = Buffer.alloc(64 * 1024, 'a')
  return new Promise((resolve) => {
    let queued = 0
    let flushed = 0
    let pending = 0
    let closed = false
    const settle = () => {
      if (closed && pending === 0) resolve(flushed)
    }
    response.on('close', () => {
      closed = true
      settle()
    })
    const pump = () => {
      while (queued < total && !response.destroyed) {
        const size = Math.min(chunk.length, total - queued)
        queued += size
        pending++
        const more = response.write(size === chunk.length ? chunk : chunk.subarray(0, size), (error) => {
          if (!error) flushed += size
          pending--
          settle()
        })
        if (!more) return void response.once('drain', pump)
      }
      if (response.destroyed) return
      if (options.cut) response.socket?.destroySoon()
      else response.end()
    }
    pump()
  })
}
