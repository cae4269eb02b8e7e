import { Type, type Static } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid } from '../../domain.js'
import { errorResponses, Text } from '../../http/schemas.js'
import type { EventRecord } from '../../store/store.js'
import { decodeCursor, decodePageCursor, encodeCursor, encodePageCursor } from '../../stream/cursor.js'
import { eventsAfter } from '../../stream/backlog.js'

/** SPEC §7.2: every type an event can have (see migrations/005_events.sql). */
export const EventType = Type.Union([
  Type.Literal('tokens.invalidated'),
  Type.Literal('token.revoked'),
  Type.Literal('company.tokens_revoked'),
  Type.Literal('agent.tokens_revoked'),
  Type.Literal('user.activated'),
  Type.Literal('user.deactivated'),
  Type.Literal('agent.activated'),
  Type.Literal('agent.deactivated'),
  Type.Literal('api_key.created'),
  Type.Literal('api_key.revoked'),
])

const Event = Type.Object({
  id: Type.String(),
  type: EventType,
  at: Type.String({ format: 'date-time' }),
  actor: Type.Union([
    Type.Object({ kind: Type.Literal('apiKey'), keyId: Type.String() }),
    Type.Object({ kind: Type.Literal('admin') }),
    Type.Object({ kind: Type.Literal('operator'), id: Type.String(), name: Type.String() }),
  ]),
  subject: Type.Object({
    kind: Type.Union([Type.Literal('user'), Type.Literal('agent'), Type.Literal('company'), Type.Literal('apiKey'), Type.Literal('token')]),
    id: Type.Optional(Type.String()),
    externalId: Type.Optional(Type.String()),
    keyId: Type.Optional(Type.String()),
    jti: Type.Optional(Type.String()),
  }),
  detail: Type.Object({
    newTokenVersion: Type.Optional(Type.Integer()),
    tokensGeneration: Type.Optional(Type.Integer()),
    userId: Type.Optional(Type.String()),
    expiresAt: Type.Optional(Type.String()),
    name: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  }),
})

const EventPage = Type.Object({
  events: Type.Array(Event),
  next: Type.Union([Type.String(), Type.Null()], { description: 'pass as `before` for the next (older) page; null at the end, and with `after`' }),
  cursor: Type.String({ description: 'pass as `after` for the events committed since this answer (the same cursor as the event stream\'s `id:`)' }),
})

const EventQuery = Type.Object(
  {
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,6}$', description: '1 to 500, default 100' })),
    before: Type.Optional(Text(8192)),
    after: Type.Optional(Text(8192, 0)),
  },
  { additionalProperties: false },
)

const DEFAULT_LIMIT = 100
const MAX_LIMIT = 500

const BAD_BEFORE = 'before must be a cursor returned as next by this listing'
const BAD_AFTER = 'after must be a cursor returned as cursor by this listing, or an id of the event stream, and not older than the retention'

function limitOf(text: string | undefined): number {
  if (text === undefined) return DEFAULT_LIMIT
  const limit = Number(text)
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw errors.validation(`limit must be an integer from 1 to ${MAX_LIMIT}`)
  return limit
}

// The store writes only these shapes (store.ts); the response schema drops anything else.
const eventBody = (event: EventRecord) => ({ ...event, at: event.at.toISOString() }) as Static<typeof Event>

/**
 * SPEC §7.2: a company's audit trail, newest first, a page at a time, every page read at the
 * first page's snapshot; or, with `after`, what committed since a cursor, oldest first (in
 * commit order, as the event stream gives it: stream/cursor.ts).
 */
export const eventRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, cursorSecret }) => {
  fastify.get(
    '/companies/:companyId/events',
    { schema: { params: Type.Object({ companyId: Type.String() }), querystring: EventQuery, response: { 200: EventPage, ...errorResponses(400, 401, 404) } } },
    async (request) => {
      const companyId = canonicalUuid(request.params.companyId)
      if (companyId === undefined || (await store.getCompany(companyId)) === undefined) throw errors.notFound('Company')
      const limit = limitOf(request.query.limit)
      const key = await cursorSecret()
      const { before, after } = request.query
      if (before !== undefined && after !== undefined) throw errors.validation('before and after cannot be used together')
      if (after !== undefined) {
        const from = decodeCursor(key, companyId, after)
        // One more than asked: whether the page ends where the reads do.
        const found = from === undefined ? undefined : await eventsAfter(store.eventsSince, companyId, from, undefined, limit + 1)
        if (found === undefined || found.pruned) throw errors.validation(BAD_AFTER)
        const page = found.events.slice(0, limit)
        const last = page.at(-1)
        const cursor = found.events.length > limit && last !== undefined ? last.position : { base: found.end }
        return { events: page.map(({ event }) => eventBody(event)), next: null, cursor: encodeCursor(key, companyId, cursor) }
      }
      const from = before === undefined ? undefined : decodePageCursor(key, companyId, before)
      if (before !== undefined && from === undefined) throw errors.validation(BAD_BEFORE)
      // One more than asked: whether there is a next page, without a count.
      const read = await store.listEvents(companyId, limit + 1, from)
      const snapshot = from?.snapshot ?? read.snapshot
      const page = read.events.slice(0, limit)
      return {
        events: page.map(eventBody),
        next: read.events.length > limit ? encodePageCursor(key, companyId, snapshot, page.at(-1)!.id) : null,
        cursor: encodeCursor(key, companyId, { base: snapshot }),
      }
    },
  )
}
