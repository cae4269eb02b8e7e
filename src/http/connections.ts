import { METHODS, ServerResponse, type IncomingMessage, type Server } from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import type { LimitsConfig } from '../config.js'
import { batchWrites } from './write-batching.js'
import { enforceRequestDeadlines } from './request-deadline.js'
import type { NodeInternals } from './node-internals.js'

/**
 * SPEC §7.3: a client that sends slowly holds a connection for at most REQUEST_TIMEOUT, and
 * however many do it, the node keeps answering others. Node enforces the request and
 * headers timeouts on a timer; by default that timer runs every 30 s, which would let a slow
 * client stay up to 30 s past its deadline, so it runs every second here.
 */
export function connectionOptions(limits: LimitsConfig): Partial<FastifyServerOptions> {
  return {
    requestTimeout: limits.requestTimeoutMs,
    // Silence while a request is open (a client that stops reading its answer) ends it too.
    connectionTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    trustProxy: limits.trustProxy.length > 0 ? limits.trustProxy : false,
    http: {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      maxHeaderSize: limits.maxHeaderSize,
      connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs),
    },
  } as Partial<FastifyServerOptions>
}

/**
 * What the Node server needs beyond Fastify's options: the connection cap, the answers of one
 * turn written together (write-batching.ts, where this Node allows it: node-internals.ts),
 * REQUEST_TIMEOUT held by a check of our own besides Node's (request-deadline.ts), every
 * method Node's parser accepts routed to Fastify, and `Expect` headers other than 100-continue
 * handled by the routes instead of Node's own 417 (a proxy turns a 417 from the verify
 * endpoint into a 500).
 */
export function hardenServer(fastify: FastifyInstance, limits: LimitsConfig, internals: NodeInternals): void {
  const server = fastify.server as Server
  if (limits.maxConnections > 0) server.maxConnections = limits.maxConnections
  if (limits.batchWrites) batchWrites(server, internals.socketWrites)
  enforceRequestDeadlines(server, limits.requestTimeoutMs)
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => fastify.routing(request, response))
  // Node hands CONNECT to this event and, without a listener, drops the connection: answer it
  // like any other request (this service tunnels nothing), then close.
  server.on('connect', (request: IncomingMessage, socket: Socket) => {
    const response = new ServerResponse(request)
    response.shouldKeepAlive = false
    response.assignSocket(socket)
    response.on('finish', () => {
      response.detachSocket(socket)
      socket.end()
    })
    socket.on('error', () => socket.destroy())
    fastify.routing(request, response)
  })
}

/** Registers every method of Node's HTTP parser, so that routes declared with `all` answer all of them. */
export function acceptEveryMethod(fastify: FastifyInstance): void {
  const known = new Set(fastify.supportedMethods)
  for (const method of METHODS) {
    if (known.has(method)) continue
    fastify.addHttpMethod(method, { hasBody: true })
  }
}
