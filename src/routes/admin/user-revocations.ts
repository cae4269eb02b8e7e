import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid } from '../../domain.js'
import { callerOf } from '../../http/admin-callers.js'
import { errorResponses, Text } from '../../http/schemas.js'
import { Receipt, receiptBody } from './schemas.js'

/**
 * SPEC §10.2: an operator's revocations of one user's tokens, or of one token, whatever the
 * company; each answers once every node refuses what it revoked, with the receipt.
 */
export const userRevocationRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, changes, revoker }) => {
  fastify.post(
    '/customer-users/:customerUserId/invalidate',
    {
      schema: {
        params: Type.Object({ customerUserId: Type.String() }),
        response: { 200: Type.Object({ customerUserId: Type.String(), newTokenVersion: Type.Integer(), receipt: Receipt }), ...errorResponses(401, 403, 404, 503) },
      },
    },
    async (request) => {
      const userId = canonicalUuid(request.params.customerUserId)
      const user = userId === undefined ? undefined : await store.getUser(userId)
      const invalidated = user === undefined ? undefined : await changes.invalidateTokens(user.companyId, user.id, callerOf(request).actor)
      if (invalidated === undefined) throw errors.notFound('Customer user')
      return { customerUserId: invalidated.record.id, newTokenVersion: invalidated.record.tokenVersion, receipt: receiptBody(invalidated.receipt) }
    },
  )

  fastify.post(
    '/tokens/revoke',
    {
      schema: {
        body: Type.Object({ token: Text(8192) }, { additionalProperties: false }),
        response: {
          200: Type.Object({
            message: Type.String(),
            jti: Type.String(),
            expiresAt: Type.String(),
            receipt: Type.Union([Receipt, Type.Null()], { description: 'null: the token was already revoked, or has expired (nothing more to refuse)' }),
          }),
          ...errorResponses(400, 401, 403, 409, 503),
        },
      },
    },
    async (request) => {
      const { jti, exp, receipt } = await revoker.revokeAnyCompany(request.body.token, callerOf(request).actor)
      return { message: 'Token revoked successfully', jti, expiresAt: new Date(exp * 1000).toISOString(), receipt: receipt === null ? null : receiptBody(receipt) }
    },
  )
}
