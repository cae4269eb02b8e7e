import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CredentialGuard } from '../http/credential-guard.js'
import { errors } from '../errors.js'
import { errorResponses, Text } from '../http/schemas.js'
import { basicCredentials } from '../http/basic-credentials.js'
import { decodeCursor, type Position } from '../stream/cursor.js'
import type { EventHub } from '../stream/hub.js'
import { JSON_CONTENT_TYPE } from '../json-text.js'
import { writeAsReady } from '../http/write-batching.js'

/** SPEC §7.2: every type an event can have (migrations/005_events.sql). */
export const EVENT_TYPES = new Set([
  'tokens.invalidated',
  'token.revoked',
  'company.tokens_revoked',
  'agent.tokens_revoked',
  'user.activated',
  'user.deactivated',
  'agent.activated',
  'agent.deactivated',
  'api_key.created',
  'api_key.revoked',
])

const StreamQuery = Type.Object(
  {
    types: Type.Optional(Text(512)),
    after: Type.Optional(Text(8192)),
  },
  { additionalProperties: false },
)

const STREAM_DESCRIPTION =
  'Server-Sent Events: `id: <cursor>`, `event: <type>`, `data: <the event as the listing gives it>`, oldest first, then live; `: ping` at least every 15 s; `event: reset` (data `{}`) when the cursor given is too old or not one of this company.'

export interface EventStreamRouteOptions {
  credentials: Pick<CredentialGuard, 'apiKey'>
  hub: EventHub
  cursorSecret(): Promise<Buffer>
}

function typesOf(text: string | undefined): Set<string> | undefined {
  if (text === undefined) return undefined
  const types = text.split(',')
  const unknown = types.find((type) => !EVENT_TYPES.has(type))
  if (unknown !== undefined) throw errors.validation(`types: unknown event type ${JSON.stringify(unknown.slice(0, 64))}`)
  return new Set(types)
}

/** GET /rest/v1/auth/events — SPEC §8.2: the company's events as a Server-Sent Events stream. */
export const eventStreamRoute: FastifyPluginAsyncTypebox<EventStreamRouteOptions> = async (fastify, { credentials, hub, cursorSecret }) => {
  fastify.get(
    '/rest/v1/auth/events',
    {
      schema: {
        querystring: StreamQuery,
        response: {
          200: { description: STREAM_DESCRIPTION, content: { 'text/event-stream': { schema: Type.String() } } },
          ...errorResponses(400, 401, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { keyId, keySecret } = basicCredentials(request.headers.authorization)
      const key = await credentials.apiKey(request, keyId, keySecret)
      const types = typesOf(request.query.types)
      const presented = request.headers['last-event-id'] ?? request.query.after
      const resume: Position | 'reset' | undefined =
        typeof presented !== 'string' || presented === '' ? undefined : (decodeCursor(await cursorSecret(), key.companyId, presented) ?? 'reset')
      const refused = hub.reserve(key.companyId)
      if (refused === 'node-full') throw errors.tooManyEventStreams()
      if (refused === 'company-full') throw errors.tooManyCompanyEventStreams()
      reply.hijack()
      const response = reply.raw
      // An idle stream is kept open by its pings, not closed by the request timeout.
      request.raw.socket.setTimeout(0)
      writeAsReady(request.raw.socket)
      const start = () => {
        // connection: close — the socket ends with the stream, so a closing node waits for no idle keep-alive.
        response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no', connection: 'close' })
        response.write(': open\n\n')
      }
      try {
        await hub.open({ companyId: key.companyId, types, resume, response, start })
      } catch (error) {
        request.log.warn({ err: error }, 'event stream: could not open (the client reconnects with its cursor)')
        if (response.headersSent) return void response.end()
        const unavailable = errors.unavailable()
        response.writeHead(unavailable.statusCode, { 'content-type': JSON_CONTENT_TYPE, ...unavailable.headers, connection: 'close' })
        response.end(JSON.stringify({ statusCode: unavailable.statusCode, message: unavailable.message, code: unavailable.code }))
      }
    },
  )
}
