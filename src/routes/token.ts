import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CredentialGuard } from '../http/credential-guard.js'
import type { TokenIssuer } from '../auth/issue-token.js'
import { AgentSummary, errorResponses, Text, UserBody } from '../http/schemas.js'

const TokenRequest = Type.Object({
  keyId: Text(128),
  keySecret: Text(256),
  userId: Text(255),
  agentId: Type.Optional(Text(64)),
  expiresIn: Type.Optional(Text(32)),
})

const TokenResponse = Type.Object({
  token: Type.String(),
  user: UserBody,
  agent: AgentSummary,
  expiresAt: Type.String(),
})

/** POST /rest/v1/auth/token — SPEC §3.1. */
export interface TokenRouteOptions {
  /** API-key check with the failed-credential limit (SPEC §7.3) */
  credentials: Pick<CredentialGuard, 'apiKey'>
  tokens: TokenIssuer
}

export const tokenRoute: FastifyPluginAsyncTypebox<TokenRouteOptions> = async (fastify, { credentials, tokens }) => {
  fastify.post(
    '/rest/v1/auth/token',
    { schema: { body: TokenRequest, response: { 200: TokenResponse, ...errorResponses(400, 401, 403, 429, 503) } } },
    async (request) => {
      const { keyId, keySecret, userId, agentId, expiresIn } = request.body
      const key = await credentials.apiKey(request, keyId, keySecret)
      const lifetime = tokens.lifetime(expiresIn)
      const requestedAgent = agentId === undefined ? undefined : await tokens.agentOfCompany(key.companyId, agentId)
      const user = await tokens.findOrCreateUser(key.companyId, userId, requestedAgent)
      const agent = requestedAgent ?? (await tokens.agentOfCompany(key.companyId, user.agentId))
      const { token, exp } = await tokens.sign(user, agent, lifetime)
      return {
        token,
        user: { id: user.id, externalId: user.externalId, companyId: user.companyId, agentId: agent.id },
        agent: { id: agent.id, name: agent.name, active: agent.active },
        expiresAt: new Date(exp * 1000).toISOString(),
      }
    },
  )
}
