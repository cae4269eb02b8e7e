import { randomUUID } from 'node:crypto'
import { Type, type Static } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid } from '../../domain.js'
import { errorResponses, Text } from '../../http/schemas.js'
import type { DeliveryRecord, WebhookRecord } from '../../store/store.js'
import { generateWebhookSecret } from '../../webhooks/signature.js'
import { EventType } from './events.js'
import { EVENT_TYPES } from '../events-stream.js'

const Webhook = Type.Object({
  id: Type.String(),
  companyId: Type.String(),
  url: Type.String(),
  types: Type.Union([Type.Array(EventType), Type.Null()], { description: 'the event types sent; null: every type' }),
  createdAt: Type.String(),
})
const CreatedWebhook = Type.Object({
  ...Webhook.properties,
  secret: Type.String({ description: '`whsec_…`: verifies the signatures (Standard Webhooks). Shown only in this answer' }),
})
const Delivery = Type.Object({
  deliveryId: Type.String({ description: 'this delivery (redeliver it with POST /admin/v1/webhook-deliveries/{deliveryId}/redeliver)' }),
  eventId: Type.String(),
  eventType: EventType,
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('retrying'), Type.Literal('failed')], {
    description: 'pending: not tried yet; delivered: a 2xx came; retrying: the last attempt failed, another is due at nextAttemptAt; failed: given up after 24 h',
  }),
  attempt: Type.Integer({ description: 'attempts made' }),
  at: Type.Union([Type.String(), Type.Null()], { description: 'when the last attempt was made' }),
  responseStatus: Type.Union([Type.Integer(), Type.Null()], { description: "the last attempt's HTTP status; null when none came (timeout, refused connection)" }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'why the last attempt failed' }),
  nextAttemptAt: Type.Union([Type.String(), Type.Null()]),
})

const MAX_URL_LENGTH = 2048
const DEFAULT_LIMIT = 100
const MAX_LIMIT = 500

const iso = (date: Date | null) => (date === null ? null : date.toISOString())
// The store keeps only the types the schema let in.
const webhookBody = (w: WebhookRecord): Static<typeof Webhook> => ({ id: w.id, companyId: w.companyId, url: w.url, types: w.types as Static<typeof Webhook>['types'], createdAt: w.createdAt.toISOString() })
const deliveryBody = (d: DeliveryRecord): Static<typeof Delivery> => ({
  deliveryId: d.id,
  eventId: d.eventId,
  eventType: d.eventType as Static<typeof EventType>,
  status: d.deliveredAt !== null ? 'delivered' : d.nextAttemptAt === null ? 'failed' : d.attempts === 0 ? 'pending' : 'retrying',
  attempt: d.attempts,
  at: iso(d.lastAttemptAt),
  responseStatus: d.lastStatus,
  error: d.lastError,
  nextAttemptAt: iso(d.nextAttemptAt),
})

/** Only http: and https:, and no credentials in the URL (they would show in every listing). */
function endpointUrl(text: string): URL {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw errors.validation('url must be an absolute http: or https: URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw errors.validation('url must be an absolute http: or https: URL')
  if (url.username !== '' || url.password !== '') throw errors.validation('url must not carry a user name or password')
  return url
}

/** SPEC §9.3: a public address, unless the operator allowed private networks (each attempt checks again). */
async function publicDestination(url: URL, destinations: AdminServices['webhookDestinations']): Promise<void> {
  const refused = await destinations.refusal(url)
  if (refused !== undefined) throw errors.validation(`url must be a public address: ${refused} (WEBHOOK_ALLOW_PRIVATE_NETWORKS allows private networks)`)
}

function limitOf(text: string | undefined): number {
  if (text === undefined) return DEFAULT_LIMIT
  const limit = Number(text)
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) throw errors.validation(`limit must be an integer from 1 to ${MAX_LIMIT}`)
  return limit
}

/** SPEC §9.3: a company's webhook endpoints and what was sent to them (the sending: webhooks/). */
export const webhookRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, webhookDestinations }) => {
  const CompanyParams = Type.Object({ companyId: Type.String() })
  const WebhookParams = Type.Object({ webhookId: Type.String() })

  fastify.post(
    '/companies/:companyId/webhooks',
    {
      schema: {
        params: CompanyParams,
        body: Type.Object(
          {
            url: Text(MAX_URL_LENGTH),
            // Text, not the types' union: an unknown type is named in the answer (as the event stream names it), not 11 schema errors.
            types: Type.Optional(Type.Array(Text(64), { minItems: 1, maxItems: 20, uniqueItems: true, description: `the event types to send (${[...EVENT_TYPES].join(', ')}); absent: every type` })),
          },
          { additionalProperties: false },
        ),
        response: { 201: CreatedWebhook, ...errorResponses(400, 401, 404) },
      },
    },
    async (request, reply) => {
      const companyId = canonicalUuid(request.params.companyId)
      if (companyId === undefined) throw errors.notFound('Company')
      const url = endpointUrl(request.body.url)
      const types = request.body.types ?? null
      const unknown = types?.find((type) => !EVENT_TYPES.has(type))
      if (unknown !== undefined) throw errors.validation(`types: unknown event type ${JSON.stringify(unknown)}`)
      await publicDestination(url, webhookDestinations)
      const secret = generateWebhookSecret()
      const created = await store.createWebhook({ id: randomUUID(), companyId, url: url.href, types, secret })
      if (created === undefined) throw errors.notFound('Company')
      // The only time the secret is shown.
      return reply.code(201).send({ ...webhookBody(created), secret })
    },
  )

  fastify.get(
    '/companies/:companyId/webhooks',
    { schema: { params: CompanyParams, response: { 200: Type.Array(Webhook), ...errorResponses(401, 404) } } },
    async (request) => {
      const companyId = canonicalUuid(request.params.companyId)
      if (companyId === undefined || (await store.getCompany(companyId)) === undefined) throw errors.notFound('Company')
      return (await store.listWebhooks(companyId)).map(webhookBody)
    },
  )

  fastify.delete(
    '/webhooks/:webhookId',
    { schema: { params: WebhookParams, response: { 200: Webhook, ...errorResponses(401, 404) } } },
    async (request) => {
      // Its queue goes with it: nothing more is sent to it once this answers (an attempt in flight ends).
      const webhookId = canonicalUuid(request.params.webhookId)
      const deleted = webhookId === undefined ? undefined : await store.deleteWebhook(webhookId)
      if (deleted === undefined) throw errors.notFound('Webhook')
      return webhookBody(deleted)
    },
  )

  fastify.get(
    '/webhooks/:webhookId/deliveries',
    {
      schema: {
        params: WebhookParams,
        querystring: Type.Object({ limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,6}$', description: '1 to 500, default 100' })) }, { additionalProperties: false }),
        response: { 200: Type.Array(Delivery), ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const webhookId = canonicalUuid(request.params.webhookId)
      if (webhookId === undefined || (await store.getWebhook(webhookId)) === undefined) throw errors.notFound('Webhook')
      return (await store.listDeliveries(webhookId, limitOf(request.query.limit))).map(deliveryBody)
    },
  )

  // SPEC §10.2: that delivery's event queued again for its endpoint, due now; the listing shows it.
  fastify.post(
    '/webhook-deliveries/:deliveryId/redeliver',
    {
      schema: {
        params: Type.Object({ deliveryId: Type.String() }),
        response: {
          202: Type.Object({ deliveryId: Type.String(), webhookId: Type.String(), eventId: Type.String(), status: Type.Literal('pending') }, { description: 'Queued: the new delivery, due now' }),
          ...errorResponses(401, 403, 404),
        },
      },
    },
    async (request, reply) => {
      const { deliveryId } = request.params
      // Delivery ids are positive bigints: anything else names none.
      const queued = /^[1-9][0-9]{0,17}$/.test(deliveryId) ? await store.redeliver(deliveryId) : undefined
      if (queued === undefined) throw errors.notFound('Webhook delivery')
      return reply.code(202).send({ deliveryId: queued.id, webhookId: queued.webhookId, eventId: queued.eventId, status: 'pending' as const })
    },
  )
}
