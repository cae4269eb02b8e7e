import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CredentialGuard } from '../http/credential-guard.js'
import type { TokenIssuer } from '../auth/issue-token.js'
import { andThen } from '../cache/states.js'
import type { AgentState, ApiKeyState, UserState } from '../domain.js'
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
    // The steps in order, each going on at once when the caches answered it (a token for a
    // cached user is answered without a promise), after its promise otherwise.
    (request) => {
      const { keyId, keySecret, userId, agentId, expiresIn } = request.body
      return andThen(credentials.apiKey(request, keyId, keySecret), (key: ApiKeyState) => {
        const lifetime = tokens.lifetime(expiresIn)
        const forUser = (requestedAgent: AgentState | undefined) =>
          andThen(tokens.findOrCreateUser(key.companyId, userId, requestedAgent), (user: UserState) =>
            andThen(requestedAgent ?? tokens.agentOfCompany(key.companyId, user.agentId), (agent: AgentState) =>
              andThen(tokens.sign(user, agent, lifetime), ({ token, exp }) => ({
                token,
                user: { id: user.id, externalId: user.externalId, companyId: user.companyId, agentId: agent.id },
                agent: { id: agent.id, name: agent.name, active: agent.active },
                expiresAt: new Date(exp * 1000).toISOString(),
              })),
            ),
          )
        return agentId === undefined ? forUser(undefined) : andThen(tokens.agentOfCompany(key.companyId, agentId), forUser)
      })
    },
  )
}
