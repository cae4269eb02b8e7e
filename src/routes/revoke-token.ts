import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CredentialGuard } from '../http/credential-guard.js'
import type { TokenRevoker } from '../auth/revoke-token.js'
import { errorResponses, Text } from '../http/schemas.js'

const RevokeTokenRequest = Type.Object({
  keyId: Text(128),
  keySecret: Text(256),
  token: Text(8192),
})

const RevokeTokenResponse = Type.Object({
  message: Type.String(),
  jti: Type.String(),
  expiresAt: Type.String(),
})

/** POST /rest/v1/auth/revoke-token — SPEC §7.1 ("log out this device"). */
export interface RevokeTokenRouteOptions {
  /** API-key check with the failed-credential limit (SPEC §7.3) */
  credentials: Pick<CredentialGuard, 'apiKey'>
  revoker: TokenRevoker
}

export const revokeTokenRoute: FastifyPluginAsyncTypebox<RevokeTokenRouteOptions> = async (fastify, { credentials, revoker }) => {
  fastify.post(
    '/rest/v1/auth/revoke-token',
    { schema: { body: RevokeTokenRequest, response: { 200: RevokeTokenResponse, ...errorResponses(400, 401, 409, 429, 503) } } },
    async (request) => {
      const { keyId, keySecret, token } = request.body
      const key = await credentials.apiKey(request, keyId, keySecret)
      // Resolves only once every node refuses the token.
      const { jti, exp } = await revoker.revoke(key, token)
      return { message: 'Token revoked successfully', jti, expiresAt: new Date(exp * 1000).toISOString() }
    },
  )
}
