import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CredentialGuard } from '../http/credential-guard.js'
import type { Changes } from '../changes.js'
import { errors } from '../errors.js'
import { isUuid } from '../domain.js'
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
export interface InvalidateRouteOptions {
  /** API-key check with the failed-credential limit (SPEC §7.3) */
  credentials: Pick<CredentialGuard, 'apiKey'>
  changes: Pick<Changes, 'invalidateTokens'>
}

export const invalidateRoute: FastifyPluginAsyncTypebox<InvalidateRouteOptions> = async (fastify, { credentials, changes }) => {
  fastify.post(
    '/rest/v1/auth/invalidate-token',
    { schema: { body: InvalidateRequest, response: { 200: InvalidateResponse, ...errorResponses(400, 401, 429, 503) } } },
    async (request) => {
      const { keyId, keySecret, customerUserId } = request.body
      const key = await credentials.apiKey(request, keyId, keySecret)
      if (!isUuid(customerUserId)) throw errors.customerUserNotFound()
      // Resolves only once every node rejects the older tokens (SPEC §3.2 step 3).
      const invalidated = await changes.invalidateTokens(key.companyId, customerUserId, { kind: 'apiKey', keyId: key.keyId })
      if (invalidated === undefined) throw errors.customerUserNotFound()
      const { record } = invalidated
      return { message: 'All tokens invalidated successfully', customerUserId: record.id, newTokenVersion: record.tokenVersion }
    },
  )
}
