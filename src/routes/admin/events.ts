import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
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

// Opaque to callers and bound to one company: a version byte, the last id of the page and a
// MAC over (company, id) with a secret kept in the store, so every node of a deployment reads
// the cursors of every other, and a cursor of another company or a hand-made one is refused.
const CURSOR_VERSION = 2
const MAC_BYTES = 16
const CURSOR_BYTES = 1 + 8 + MAC_BYTES
const CURSOR_SECRET_NAME = 'event-cursor-hmac'
const BAD_CURSOR = 'before must be a cursor returned as next by this listing'

const macOf = (secret: Buffer, companyId: string, id: bigint) => createHmac('sha256', secret).update(`${companyId}.${id}`).digest().subarray(0, MAC_BYTES)

function cursorOf(secret: Buffer, companyId: string, id: string): string {
  const cursor = Buffer.alloc(CURSOR_BYTES)
  cursor.writeUInt8(CURSOR_VERSION, 0)
  cursor.writeBigInt64BE(BigInt(id), 1)
  macOf(secret, companyId, BigInt(id)).copy(cursor, 9)
  return cursor.toString('base64url')
}

function idOfCursor(secret: Buffer, companyId: string, cursor: string): string {
  const bytes = Buffer.from(cursor, 'base64url')
  if (bytes.length !== CURSOR_BYTES || bytes.toString('base64url') !== cursor || bytes.readUInt8(0) !== CURSOR_VERSION) throw errors.validation(BAD_CURSOR)
  const id = bytes.readBigInt64BE(1)
  if (id < 1n || !timingSafeEqual(bytes.subarray(9), macOf(secret, companyId, id))) throw errors.validation(BAD_CURSOR)
  return String(id)
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
  // Read on first use, not at registration: a node boots while its store is away.
  let secret: Promise<Buffer> | undefined
  const cursorSecret = (): Promise<Buffer> => {
    secret ??= store.getOrCreateSecret(CURSOR_SECRET_NAME, randomBytes(32).toString('base64url')).then(
      (value) => Buffer.from(value, 'base64url'),
      (error: unknown) => {
        secret = undefined
        throw error
      },
    )
    return secret
  }
  fastify.get(
    '/companies/:companyId/events',
    { schema: { params: Type.Object({ companyId: Type.String() }), querystring: EventQuery, response: { 200: EventPage, ...errorResponses(400, 401, 404) } } },
    async (request) => {
      const companyId = canonicalUuid(request.params.companyId)
      if (companyId === undefined || (await store.getCompany(companyId)) === undefined) throw errors.notFound('Company')
      const limit = limitOf(request.query.limit)
      const key = await cursorSecret()
      const before = request.query.before === undefined ? undefined : idOfCursor(key, companyId, request.query.before)
      // One more than asked: whether there is a next page, without a count.
      const rows = await store.listEvents(companyId, limit + 1, before)
      const page = rows.slice(0, limit)
      return { events: page.map(eventBody), next: rows.length > limit ? cursorOf(key, companyId, page.at(-1)!.id) : null }
    },
  )
}
