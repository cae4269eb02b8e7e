import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Gateway } from '../gateway.js'
import { authenticateApiKey } from '../auth/credentials.js'
import { errors } from '../errors.js'
import { isUuid } from '../store/store.js'
import { errorResponses, Text } from '../http/schemas.js'

const InvalidateRequest = Type.Object({
  keyId: Text(128),
  keySecret: Text(256),
  customerUserId: Text(64),
})

const InvalidateResponse = Type.Object({
  message: Type.String(),
  customerUserId: Type.String(),
  newTokenVersion: Type.Integer(),
})

/** POST /rest/v1/auth/invalidate-token — SPEC §3.2. */
export const invalidateRoute: FastifyPluginAsyncTypebox<{ gateway: Gateway }> = async (fastify, { gateway }) => {
  fastify.post(
    '/rest/v1/auth/invalidate-token',
    { schema: { body: InvalidateRequest, response: { 200: InvalidateResponse, ...errorResponses(400, 401, 503) } } },
    async (request) => {
      const { keyId, keySecret, customerUserId } = request.body
      const key = await authenticateApiKey(gateway, keyId, keySecret)
      if (!isUuid(customerUserId)) throw errors.customerUserNotFound()
      const user = await gateway.store.incrementTokenVersion(key.companyId, customerUserId)
      if (user === undefined) throw errors.customerUserNotFound()
      // Answers only once every node rejects the older tokens (SPEC §3.2 step 3).
      await gateway.announce({ kind: 'user', state: user }, user.outboxId)
      return { message: 'All tokens invalidated successfully', customerUserId: user.id, newTokenVersion: user.tokenVersion }
    },
  )
}
