import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { Type } from '@sinclair/typebox'
import type { VerifyToken } from '../../auth/verify.js'
import { AgentSummary, errorResponses, UserBody } from '../../http/schemas.js'
import type { Metrics } from '../../metrics.js'
import { undecidedReporter } from '../../http/undecided.js'
import type { WriteCheckedHead } from '../../http/node-internals.js'
import { answerVerification, cannotDecide, type VerifyEndpoint } from './answer.js'
import { endpoints } from './refused.js'
import { VERIFY_PATH } from './path.js'

const VerifyResponse = Type.Object({
  user: UserBody,
  agent: AgentSummary,
  tokenVersion: Type.Integer(),
  expiresAt: Type.String(),
})

const schema = {
  // the API description's entry (http/openapi.ts adds the tag and the framework's answers)
  summary: 'Verify a bearer token',
  description: `Listed as GET, but every method is accepted and answers the same, as does any path below \`${VERIFY_PATH}/\` (for nginx \`auth_request\`, Envoy \`ext_authz\`, Traefik ForwardAuth); a request body is never read. Answers only 200 (allow, with \`x-auth-*\` identity headers), 401 (deny, with \`WWW-Authenticate\`) or 503 (cannot decide).`,
  security: [{ chatToken: [] }],
  response: { 200: VerifyResponse, ...errorResponses(401, 503) },
}

export interface VerifyRouteOptions {
  verifyToken: VerifyToken
  /** how a prepared answer's head is written (node-internals.ts) */
  writeHead: WriteCheckedHead
  metrics?: Metrics
}

/**
 * SPEC §3.3: the verify endpoint (path.ts) and everything below it, any method, any body, so
 * that nginx auth_request, Envoy ext_authz and Traefik ForwardAuth can point at it. It
 * answers only 200, 401 or 503: a proxy turns anything else into a 500.
 */
export async function verifyRoute(fastify: FastifyInstance, { verifyToken, writeHead, metrics }: VerifyRouteOptions): Promise<void> {
  const endpoint: VerifyEndpoint = { verifyToken, writeHead, report: undecidedReporter(fastify.log, metrics), throughHooks: false }
  // what Fastify refuses before routing is answered by the same endpoint (refused.ts)
  endpoints.set(verifyToken, endpoint)
  // A proxy may forward the original request's body with any content type; it is never read.
  fastify.removeAllContentTypeParsers()
  fastify.addContentTypeParser('*', (_request, payload, done) => {
    payload.resume()
    done(null, undefined)
  })

  fastify.addHook('onRoute', (route) => {
    if (route.onSend !== undefined && route.onSend !== null && (!Array.isArray(route.onSend) || route.onSend.length > 0)) endpoint.throughHooks = true
  })
  const handler = (request: FastifyRequest, reply: FastifyReply) => answerVerification(endpoint, request, reply)
  // Only a request Fastify refused before the handler (a QUERY without a content type, say)
  // reaches this: its token still decides. Anything else means the endpoint cannot decide.
  const errorHandler = (error: Error, request: FastifyRequest, reply: FastifyReply) =>
    isRefusedRequest(error) ? answerVerification(endpoint, request, reply) : cannotDecide(endpoint, request, reply, error)
  // Every method answers alike, so the API description lists the endpoint once, as GET;
  // the other methods, and the paths below it, answer the same and stay out of it.
  const undocumented = { errorHandler, schema: { ...schema, hide: true } }
  fastify.get(VERIFY_PATH, { errorHandler, schema, exposeHeadRoute: false }, handler)
  fastify.route({ method: fastify.supportedMethods.filter((method) => method !== 'GET'), url: VERIFY_PATH, ...undocumented, handler })
  // Below the endpoint: `/…/verify/anything` and `/…/verify;matrix=params`.
  for (const path of [`${VERIFY_PATH}/*`, `${VERIFY_PATH};*`]) fastify.all(path, undocumented, handler)
}

function isRefusedRequest(error: Error): boolean {
  const status = (error as { statusCode?: unknown }).statusCode
  return typeof status === 'number' && status >= 400 && status < 500
}
