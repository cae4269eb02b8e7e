import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { generateApiKey, looksLikeKeyId } from '../../auth/api-keys.js'
import { errors } from '../../errors.js'
import { isUuid } from '../../domain.js'
import { callerOf } from '../../http/admin-callers.js'
import { errorResponses, Text } from '../../http/schemas.js'
import { ApiKeyListItem, apiKeyListBody, Receipt, receiptBody } from './schemas.js'

const CreatedApiKey = Type.Object({
  keyId: Type.String(),
  keySecret: Type.String(),
  companyId: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
})

export const apiKeyRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, changes }) => {
  const CompanyParams = Type.Object({ companyId: Type.String() })

  fastify.post(
    '/companies/:companyId/api-keys',
    {
      schema: {
        params: CompanyParams,
        body: Type.Object({ name: Type.Optional(Text(200)) }),
        response: { 201: CreatedApiKey, ...errorResponses(400, 401, 403, 404) },
      },
      // `{name?}`: no body at all is a key without a name.
      preValidation: async (request) => {
        if (request.body === undefined) request.body = {}
      },
    },
    async (request, reply) => {
      const { companyId } = request.params
      const { keyId, keySecret, secretHash } = generateApiKey()
      const created = isUuid(companyId) ? await store.createApiKey(companyId, keyId, secretHash, request.body.name ?? null, callerOf(request).actor) : undefined
      if (created === undefined) throw errors.notFound('Company')
      // The only time the secret is shown; only its hash is kept.
      return reply.code(201).send({ keyId, keySecret, companyId: created.companyId, name: created.name, createdAt: created.createdAt.toISOString() })
    },
  )

  fastify.get(
    '/companies/:companyId/api-keys',
    { schema: { params: CompanyParams, response: { 200: Type.Array(ApiKeyListItem), ...errorResponses(401, 403, 404) } } },
    async (request) => {
      const { companyId } = request.params
      if (!isUuid(companyId) || (await store.getCompany(companyId)) === undefined) throw errors.notFound('Company')
      return (await store.listApiKeys(companyId)).map(apiKeyListBody)
    },
  )

  fastify.delete(
    '/api-keys/:keyId',
    {
      schema: {
        params: Type.Object({ keyId: Type.String() }),
        response: { 200: Type.Object({ keyId: Type.String(), revokedAt: Type.String(), receipt: Receipt }), ...errorResponses(401, 403, 404, 503) },
      },
    },
    async (request) => {
      // Refused on every node before this answers (SPEC §4).
      const revoked = looksLikeKeyId(request.params.keyId) ? await changes.revokeApiKey(request.params.keyId, callerOf(request).actor) : undefined
      if (revoked === undefined) throw errors.notFound('API key')
      return { keyId: revoked.record.keyId, revokedAt: revoked.record.revokedAt!.toISOString(), receipt: receiptBody(revoked.receipt) }
    },
  )
}
