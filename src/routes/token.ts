import { Type } from '@sinclair/typebox'
import type { FastifyReply } from 'fastify'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { CredentialGuard } from '../http/credential-guard.js'
import type { TokenIssuer } from '../auth/issue-token.js'
import { andThen } from '../maybe-promise.js'
import type { AgentState, ApiKeyState, UserState } from '../domain.js'
import { AgentSummary, errorResponses, Text, UserBody } from '../http/schemas.js'
import { JSON_CONTENT_TYPE, jsonString } from '../json-text.js'
import { isoSeconds } from '../auth/identity-body.js'

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

/**
 * The 200 body of TokenResponse, written out: the very characters, in the same order, that
 * the route's serialiser wrote (test/stores/api/tokens/token.test.ts holds them to JSON.stringify's), in
 * ~0.5 µs where the serialiser took ~1.7, most of it scanning the token for characters to
 * escape. Written as they are: the token, the JWS compact serialisation the keyring signs
 * (base64url and dots), and the ids, UUIDs from the store's uuid columns. The customer's
 * strings, the external id and the agent's name, go through jsonString.
 */
export function tokenAnswer(token: string, user: UserState, agent: AgentState, exp: number): string {
  return (
    `{"token":"${token}","user":{"id":"${user.id}","externalId":${jsonString(user.externalId)},"companyId":"${user.companyId}",` +
    `"agentId":"${agent.id}"},"agent":{"id":"${agent.id}","name":${jsonString(agent.name)},"active":${agent.active}},` +
    `"expiresAt":"${isoSeconds(exp)}"}`
  )
}

/** POST /rest/v1/auth/token — SPEC §3.1. */
export interface TokenRouteOptions {
  /** API-key check with the failed-credential limit (SPEC §7.3) */
  credentials: Pick<CredentialGuard, 'apiKey'>
  tokens: TokenIssuer
}

export const tokenRoute: FastifyPluginAsyncTypebox<TokenRouteOptions> = async (fastify, { credentials, tokens }) => {
  fastify.post(
    '/rest/v1/auth/token',
    { schema: { body: TokenRequest, response: { 200: TokenResponse, ...errorResponses(400, 401, 403, 409, 429, 503) } } },
    (request, reply) => {
      // The steps in order, each going on at once when the caches answered the one before (a
      // token for a cached user is answered without a promise), after its promise otherwise.
      const { keyId, keySecret, userId, agentId, expiresIn } = request.body
      let companyId: string
      let lifetime: number
      let requestedAgent: AgentState | undefined
      let user: UserState
      let agent: AgentState
      return andThen(credentials.apiKey(request, keyId, keySecret), authenticated)

      /** SPEC §3.1 steps 2–3, the key authenticated (step 1): the lifetime, and the agent asked for, one of the key's company. */
      function authenticated(key: ApiKeyState) {
        companyId = key.companyId
        lifetime = tokens.lifetime(expiresIn)
        return agentId === undefined ? withAgentAsked(undefined) : andThen(tokens.agentOfCompany(companyId, agentId), withAgentAsked)
      }
      /** Step 4: the user, found or created (an explicit agent ties the user to it). */
      function withAgentAsked(asked: AgentState | undefined) {
        requestedAgent = asked
        return andThen(tokens.findOrCreateUser(companyId, userId, asked), withUser)
      }
      /** Step 3 without `agentId`: the user's current agent. */
      function withUser(found: UserState) {
        user = found
        return andThen(requestedAgent ?? tokens.agentOfCompany(companyId, found.agentId), withAgent)
      }
      /** The JWT, for the user's current token version and the company's and agent's generations. */
      function withAgent(found: AgentState) {
        agent = found
        return andThen(tokens.sign(user, agent, lifetime), answer)
      }
      /** Step 5: 200. */
      function answer({ token, exp }: { token: string; exp: number }): void {
        // JSON text with a JSON content type: Fastify sends it as it is, no serialiser (the
        // type provider types send() with the object this text encodes)
        ;(reply as FastifyReply).type(JSON_CONTENT_TYPE).send(tokenAnswer(token, user, agent, exp))
      }
    },
  )
}
