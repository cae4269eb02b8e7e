import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Gateway } from '../gateway.js'
import { authenticateApiKey } from '../auth/credentials.js'
import { agentOfCompany, findOrCreateUser, signToken, tokenLifetime } from '../auth/issue-token.js'
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
export const tokenRoute: FastifyPluginAsyncTypebox<{ gateway: Gateway }> = async (fastify, { gateway }) => {
  fastify.post(
    '/rest/v1/auth/token',
    { schema: { body: TokenRequest, response: { 200: TokenResponse, ...errorResponses(400, 401, 403, 503) } } },
    async (request) => {
      const { keyId, keySecret, userId, agentId, expiresIn } = request.body
      const key = await authenticateApiKey(gateway, keyId, keySecret)
      const lifetime = tokenLifetime(expiresIn, gateway.config.tokenMaxTtlSeconds)
      const requestedAgent = agentId === undefined ? undefined : await agentOfCompany(gateway, key.companyId, agentId)
      const user = await findOrCreateUser(gateway, key.companyId, userId, requestedAgent)
      const agent = requestedAgent ?? (await agentOfCompany(gateway, key.companyId, user.agentId))
      const { token, exp } = signToken(gateway, user, agent, lifetime)
      return {
        token,
        user: { id: user.id, externalId: user.externalId, companyId: user.companyId, agentId: agent.id },
        agent: { id: agent.id, name: agent.name, active: agent.active },
        expiresAt: new Date(exp * 1000).toISOString(),
      }
    },
  )
}
