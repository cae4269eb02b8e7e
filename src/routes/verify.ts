import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Gateway } from '../gateway.js'
import { bearerToken, type Identity } from '../auth/verify.js'
import { BEARER_CHALLENGE, denialBody, errors } from '../errors.js'
import { body } from '../http/error-handler.js'

/** The answer to an allowed request, and the headers a proxy forwards upstream. */
export function identityBody(identity: Identity) {
  return {
    user: identity.user,
    agent: identity.agent,
    tokenVersion: identity.tokenVersion,
    expiresAt: new Date(identity.exp * 1000).toISOString(),
  }
}

export function identityHeaders(identity: Identity): Record<string, string> {
  return {
    'x-auth-user-id': identity.user.id,
    'x-auth-external-id': encodeHeaderValue(identity.user.externalId),
    'x-auth-company-id': identity.user.companyId,
    'x-auth-agent-id': identity.agent.id,
  }
}

/** External ids are the customer's own strings: anything outside visible ASCII is percent-encoded. */
function encodeHeaderValue(value: string): string {
  return /^[\x21-\x7e]*$/.test(value) && !value.includes('%') ? value : encodeURIComponent(value)
}

export const VERIFY_PATH = '/rest/v1/auth/verify'

/** The verify endpoint's answer to one request: 200, 401 or 503, nothing else. */
export async function answerVerification(gateway: Gateway, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  reply.header('cache-control', 'no-store')
  try {
    const verdict = await gateway.verifyToken(bearerToken(request.headers.authorization))
    if (!verdict.ok) return reply.code(401).headers(BEARER_CHALLENGE).send(denialBody(verdict.denial))
    return reply.code(200).headers(identityHeaders(verdict.identity)).send(identityBody(verdict.identity))
  } catch (error) {
    // Whatever went wrong, this endpoint cannot decide: 503, never an allow, never a 500.
    request.log.error({ err: error }, 'verification could not be decided')
    return reply.code(503).header('retry-after', '1').send(body(errors.unavailable()))
  }
}

/**
 * SPEC §3.3: `/rest/v1/auth/verify` and everything below it, any method, any body, so
 * that nginx auth_request, Envoy ext_authz and Traefik ForwardAuth can point at it. It
 * answers only 200, 401 or 503: a proxy turns anything else into a 500.
 */
export async function verifyRoute(fastify: FastifyInstance, { gateway }: { gateway: Gateway }): Promise<void> {
  // A proxy may forward the original request's body with any content type; it is never read.
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('*', (_request, payload, done) => {
    payload.resume()
    done(null, undefined)
  })

  const handler = (request: FastifyRequest, reply: FastifyReply) => answerVerification(gateway, request, reply)
  const errorHandler = (error: Error, request: FastifyRequest, reply: FastifyReply) => {
    request.log.error({ err: error }, 'verification failed before the handler')
    return reply.code(503).header('retry-after', '1').send(body(errors.unavailable()))
  }
  fastify.all(VERIFY_PATH, { errorHandler }, handler)
  fastify.all(`${VERIFY_PATH}/*`, { errorHandler }, handler)
}
