import fp from 'fastify-plugin'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { bearerToken, type Identity, type VerifyToken } from './auth/verify.js'
import { BEARER_CHALLENGE, denialBody, errors } from './errors.js'
import { body } from './http/error-handler.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** preHandler that admits a request only with a valid chat token (SPEC §3.3 checks). */
    requireChatToken: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
  }
  interface FastifyRequest {
    /** the verified identity, set by `requireChatToken` */
    chatAuth: Identity | null
  }
}

export interface ChatAuthPluginOptions {
  /** a gateway from `createGateway` (the plugin uses only its verifier) */
  gateway: { verifyToken: VerifyToken }
}

/**
 * For a Node chat backend that verifies in-process, against the same stores and caches
 * as the gateway: `app.register(chatAuthPlugin, { gateway })`, then
 * `{ preHandler: app.requireChatToken }` on the routes to protect.
 */
export const chatAuthPlugin = fp<ChatAuthPluginOptions>(
  async (fastify, { gateway }) => {
    const { verifyToken } = gateway
    fastify.decorateRequest('chatAuth', null)
    fastify.decorate('requireChatToken', async (request: FastifyRequest, reply: FastifyReply) => {
      let verdict
      try {
        verdict = await verifyToken(bearerToken(request.headers.authorization))
      } catch (error) {
        request.log.error({ reqId: request.id, err: error }, 'verification could not be decided')
        return reply.code(503).header('retry-after', '1').send(body(errors.unavailable()))
      }
      if (!verdict.ok) return reply.code(401).headers(BEARER_CHALLENGE).send(denialBody(verdict.denial))
      request.chatAuth = verdict.identity
    })
  },
  { name: 'chat-auth', fastify: '5.x' },
)
