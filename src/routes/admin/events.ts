import { Type, type Static } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid } from '../../domain.js'
import { errorResponses, Text } from '../../http/schemas.js'
import type { EventRecord } from '../../store/store.js'

/** SPEC §7.2: every type an event can have (see migrations/005_events.sql). */
const EventType = Type.Union([
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
  actor: Type.Union([Type.Object({ kind: Type.Literal('apiKey'), keyId: Type.String() }), Type.Object({ kind: Type.Literal('admin') })]),
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
  next: Type.Union([Type.String(), Type.Null()], { description: 'pass as `before` for the next (older) page; null at the end' }),
})

const EventQuery = Type.Object(
  {
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,6}$', description: '1 to 500, default 100' })),
    before: Type.Optional(Text(64)),
  },
  { additionalProperties: false },
)

const DEFAULT_LIMIT = 100
const MAX_LIMIT = 500

// Opaque to callers: a version tag and the last id of the page. Only its shape is checked.
const CURSOR = /^e1\.([1-9][0-9]{0,18})$/
const cursorOf = (id: string) => Buffer.from(`e1.${id}`).toString('base64url')
function idOfCursor(cursor: string): string {
  const match = CURSOR.exec(Buffer.from(cursor, 'base64url').toString('latin1'))
  if (match === null || cursorOf(match[1]!) !== cursor || BigInt(match[1]!) > 9_223_372_036_854_775_807n) throw errors.validation('before must be a cursor returned as next by this listing')
  return match[1]!
}
function limitOf(text: string | undefined): number {
  if (text === undefined) return DEFAULT_LIMIT
  const limit = Number(text)
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw errors.validation(`limit must be an integer from 1 to ${MAX_LIMIT}`)
  return limit
}

// The store writes only these shapes (store.ts); the response schema drops anything else.
const eventBody = (event: EventRecord) => ({ ...event, at: event.at.toISOString() }) as Static<typeof Event>

/** SPEC §7.2: a company's audit trail, newest first, a page at a time. */
export const eventRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store }) => {
  fastify.get(
    '/companies/:companyId/events',
    { schema: { params: Type.Object({ companyId: Type.String() }), querystring: EventQuery, response: { 200: EventPage, ...errorResponses(400, 401, 404) } } },
    async (request) => {
      const companyId = canonicalUuid(request.params.companyId)
      if (companyId === undefined || (await store.getCompany(companyId)) === undefined) throw errors.notFound('Company')
      const limit = limitOf(request.query.limit)
      const before = request.query.before === undefined ? undefined : idOfCursor(request.query.before)
      // One more than asked: whether there is a next page, without a count.
      const rows = await store.listEvents(companyId, limit + 1, before)
      const page = rows.slice(0, limit)
      return { events: page.map(eventBody), next: rows.length > limit ? cursorOf(page.at(-1)!.id) : null }
    },
  )
}
