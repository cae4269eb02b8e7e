import type { FastifyReply, FastifyRequest } from 'fastify'
import { bearerToken, type Identity, type VerifiedClaims, type Verdict, type VerifyToken } from '../../auth/verify.js'
import { BEARER_CHALLENGE, denialBody, type Denial } from '../../errors.js'
import { answerUndecided, type ReportUndecided } from '../../http/undecided.js'
import { identityBody } from '../../auth/identity-body.js'
import { checkHeaders, type CheckedHeaders } from '../../http/checked-headers.js'
import type { WriteCheckedHead } from '../../http/node-internals.js'
import { JSON_CONTENT_TYPE } from '../../json-text.js'

/** The headers a proxy forwards upstream with an allowed request (its body: auth/identity-body.ts). */
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

/** Every verdict, allowed or not, is this request's alone: no proxy may keep it. */
export const NOT_STORED = { 'cache-control': 'no-store' }

/** One verify endpoint: what it answers with, and how. */
export interface VerifyEndpoint {
  readonly verifyToken: VerifyToken
  /** the head of a prepared answer: node-internals.ts, Node's internal way or its public one */
  readonly writeHead: WriteCheckedHead
  /** what the endpoint cannot decide: logged once per 5 s, counted */
  readonly report: ReportUndecided
  /**
   * The route has onSend hooks (@fastify/otel ends its request span in one, when
   * OpenTelemetry is on): a hijacked reply would skip them, so the answers go through
   * Fastify's send. Seen by an onRoute hook of the route's own plugin (route.ts), which runs
   * after those of its parents (where such a hook adds them).
   */
  throughHooks: boolean
}

/**
 * The verify endpoint's answer to one request: 200, 401 or 503, nothing else. On a cache
 * hit it answers synchronously: the hot path makes no promise at all.
 */
export function answerVerification(endpoint: VerifyEndpoint, request: FastifyRequest, reply: FastifyReply): FastifyReply | Promise<FastifyReply> {
  let verdict: Verdict | Promise<Verdict>
  try {
    verdict = endpoint.verifyToken(bearerToken(request.headers.authorization))
  } catch (error) {
    return cannotDecide(endpoint, request, reply, error)
  }
  return verdict instanceof Promise
    ? verdict.then((settled) => answer(endpoint, reply, settled), (error) => cannotDecide(endpoint, request, reply, error))
    : answer(endpoint, reply, verdict)
}

function answer(endpoint: VerifyEndpoint, reply: FastifyReply, verdict: Verdict): FastifyReply {
  if (!verdict.ok) return send(endpoint, reply, 401, preparedDenial(reply, verdict.denial))
  return send(endpoint, reply, 200, preparedAnswer(reply, verdict.claims, verdict.identity).answer)
}

/** The serialised parts of one answer: its body, and its headers with and without the body's. */
interface Prepared {
  /** for writeHead, checked once (http/checked-headers.ts) */
  headers: CheckedHeaders
  /** the same without the body's type and length, for a HEAD */
  headHeaders: CheckedHeaders
  /** the same two as objects, for reply.headers (see sentThroughHooks) */
  headerObject: Record<string, string>
  headHeaderObject: Record<string, string>
  body: string
}

function send(endpoint: VerifyEndpoint, reply: FastifyReply, status: 200 | 401, prepared: Prepared): FastifyReply {
  // A HEAD (what the proxy recipes of docs/proxies.md send) gets the status and headers alone: no body
  // is sent to a proxy that reads none, nor its length.
  const head = reply.request.method === 'HEAD'
  if (endpoint.throughHooks) {
    // onSend hooks must see the answer: Fastify sends the prepared string (no serialising).
    return reply.code(status).headers(head ? prepared.headHeaderObject : prepared.headerObject).send(head ? undefined : prepared.body)
  }
  // The bytes are final: written as they are, past Fastify's header and serialisation steps
  // (its onResponse hooks still run when the response finishes).
  reply.hijack()
  if (head) {
    endpoint.writeHead(reply.raw, status, prepared.headHeaders)
    reply.raw.end()
  } else {
    endpoint.writeHead(reply.raw, status, prepared.headers)
    reply.raw.end(prepared.body)
  }
  return reply
}

/** Headers, then the body's type and length after them, checked and in both forms. */
function serialised(headHeaders: string[], body: string): Prepared {
  const headers = [...headHeaders, 'content-type', JSON_CONTENT_TYPE, 'content-length', String(Buffer.byteLength(body))]
  return {
    headers: checkHeaders(headers),
    headHeaders: checkHeaders(headHeaders),
    headerObject: pairsToObject(headers),
    headHeaderObject: pairsToObject(headHeaders),
    body,
  }
}

// A denial is one of a few constants (errors.ts `denials`): each answer is made once.
const preparedDenials = new Map<Denial, Prepared>()

function preparedDenial(reply: FastifyReply, denial: Denial): Prepared {
  let made = preparedDenials.get(denial)
  if (made === undefined) {
    // the route's own serialiser, as for an allowed answer (prepare, below)
    const serialize = reply.getSerializationFunction('401') ?? JSON.stringify
    const challenge = Object.entries({ ...NOT_STORED, ...BEARER_CHALLENGE }).flat()
    preparedDenials.set(denial, (made = serialised(challenge, serialize(denialBody(denial)))))
  }
  return made
}

/**
 * An allowed answer, serialised: the body and the headers of one identity. Every check has
 * run for this request before it is looked up; it only saves serialising the same identity
 * again. It is reused only while every field it was made from is the very same value (the
 * cached states are replaced, never changed, so that is one comparison of references per
 * field); any change of the user, the agent or the token makes a new one.
 */
interface PreparedAnswer {
  // nested, not spread into this object: spread in, every load from these objects missed
  // V8's inline caches (callgrind: 107,700 → 121,500 instructions a verification)
  answer: Prepared
  userId: string
  externalId: string
  companyId: string
  agentId: string
  agentName: string
  agentActive: boolean
  tokenVersion: number
  exp: number
}

const pairsToObject = (pairs: string[]): Record<string, string> => {
  const object: Record<string, string> = {}
  for (let i = 0; i < pairs.length; i += 2) object[pairs[i]!] = pairs[i + 1]!
  return object
}

// Keyed by the verified claims object the keyring keeps for a token (never by the token):
// an entry goes when the keyring forgets the token.
const preparedAnswers = new WeakMap<VerifiedClaims, PreparedAnswer>()

function preparedAnswer(reply: FastifyReply, claims: VerifiedClaims, identity: Identity): PreparedAnswer {
  const known = preparedAnswers.get(claims)
  if (known !== undefined && madeFrom(known, identity)) return known
  const made = prepare(reply, identity)
  preparedAnswers.set(claims, made)
  return made
}

function madeFrom(prepared: PreparedAnswer, identity: Identity): boolean {
  const { user, agent } = identity
  return (
    prepared.userId === user.id &&
    prepared.externalId === user.externalId &&
    prepared.companyId === user.companyId &&
    prepared.agentId === user.agentId &&
    prepared.agentName === agent.name &&
    prepared.agentActive === agent.active &&
    prepared.tokenVersion === identity.tokenVersion &&
    prepared.exp === identity.exp
  )
}

function prepare(reply: FastifyReply, identity: Identity): PreparedAnswer {
  // the route's own response serialiser: the very bytes Fastify would have sent (a reply
  // Fastify refused before routing has none: JSON.stringify, the same bytes for this schema)
  const serialize = reply.getSerializationFunction('200') ?? JSON.stringify
  const body = serialize(identityBody(identity))
  const headHeaders = Object.entries({ ...NOT_STORED, ...identityHeaders(identity) }).flat()
  return {
    answer: serialised(headHeaders, body),
    userId: identity.user.id,
    externalId: identity.user.externalId,
    companyId: identity.user.companyId,
    agentId: identity.user.agentId,
    agentName: identity.agent.name,
    agentActive: identity.agent.active,
    tokenVersion: identity.tokenVersion,
    exp: identity.exp,
  }
}

/** Whatever went wrong, the endpoint cannot decide: 503, never an allow, never a 500. */
export function cannotDecide(endpoint: VerifyEndpoint, request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  endpoint.report(error, request.id)
  return answerUndecided(reply.headers(NOT_STORED))
}
