import type { FastifyReply, FastifyRequest } from 'fastify'
import type { VerifyToken } from '../../auth/verify.js'
import { BEARER_CHALLENGE, denialBody, denials } from '../../errors.js'
import type { RawAnswer } from '../../http/client-errors.js'
import { writeHeadWithPairs } from '../../http/node-internals.js'
import { undecidedReporter } from '../../http/undecided.js'
import { answerVerification, NOT_STORED, type VerifyEndpoint } from './answer.js'
import { isBelowVerifyPath, isVerifyTarget } from './path.js'

/**
 * The verify endpoint answers only 200, 401 or 503, even to requests that never reach its
 * route: a proxy turns anything else into a 500.
 */

/** Each verifier's endpoint (route.ts), for the requests Fastify refused before routing. */
export const endpoints = new WeakMap<VerifyToken, VerifyEndpoint>()

/**
 * A request Node's parser refused (headers over MAX_HEADER_SIZE, a malformed request):
 * on the verify path, 401 with the SPEC's denial body, as a token the node could not read.
 * A request whose target could not be read is treated as a verify call too (a 401 to a
 * refused request of another route is still a refusal; a 431 to a proxy's verify call is a
 * 500 for its client). Others: undefined (http/client-errors.ts answers 431 or 400).
 */
export function refusedVerifyCall(target: string | undefined): RawAnswer | undefined {
  if (target !== undefined && !isVerifyTarget(target)) return undefined
  return { status: 401, headers: { ...BEARER_CHALLENGE, ...NOT_STORED }, body: denialBody(denials.invalidToken) }
}

/**
 * A request below the verify path that Fastify refused before routing (a malformed URL):
 * its token decides, as at the route. Others: undefined.
 */
export function answerUnroutedVerifyCall(verifyToken: VerifyToken, request: FastifyRequest, reply: FastifyReply): FastifyReply | Promise<FastifyReply> | undefined {
  if (!isBelowVerifyPath(request.url)) return undefined
  let endpoint = endpoints.get(verifyToken)
  if (endpoint === undefined) endpoints.set(verifyToken, (endpoint = { verifyToken, writeHead: writeHeadWithPairs, report: undecidedReporter(request.server.log), throughHooks: false }))
  return answerVerification(endpoint, request, reply)
}
