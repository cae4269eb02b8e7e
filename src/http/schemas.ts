import { Type, type TSchema } from '@sinclair/typebox'

/** SPEC §3: every error body. */
export const ErrorBody = Type.Object({
  statusCode: Type.Integer(),
  message: Type.String(),
  code: Type.String(),
})

/** What each error status means, for the API description. */
const ERROR_MEANINGS: Record<number, string> = {
  400: 'Bad input: a field is missing, of the wrong type or too long, the JSON is malformed, or a step of the call refused it (see `code`)',
  401: 'Credentials missing or wrong (API key, admin token or bearer token; see `code`)',
  403: 'Refused: the customer user is inactive (`CUSTOMER_USER_INACTIVE`), the caller\'s role does not allow the call (`FORBIDDEN`, nothing done), or a write from a console session lacks its anti-CSRF token (`CSRF`)',
  404: 'No such company, agent, API key, customer user, webhook, delivery, operator or route',
  409: 'Refused by the current state: the company holds its limit of live single-token revocations (`REVOCATION_LIMIT`); invalidate the user or revoke the company\'s tokens instead',
  413: 'The body is over the body limit',
  415: 'The body is not application/json',
  429: 'Too many failed credential attempts from this address or on this key; see Retry-After',
  503: 'A store cannot answer; see Retry-After',
}

/** The error body of one status, described. */
export function errorBody(status: number): TSchema {
  return Type.Object(ErrorBody.properties, { description: ERROR_MEANINGS[status] ?? 'Error' })
}

/** Documents and serialises the error statuses a route can answer. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((status) => [status, errorBody(status)]))
}

export const UserBody = Type.Object({
  id: Type.String(),
  externalId: Type.String(),
  companyId: Type.String(),
  agentId: Type.String(),
})

export const AgentSummary = Type.Object({
  id: Type.String(),
  name: Type.String(),
  active: Type.Boolean(),
})

/**
 * Bounded strings: an empty or oversized value is a 400 before any work is done, and so
 * is a NUL character, which PostgreSQL cannot store in text, and a lone UTF-16 surrogate
 * (not well-formed text: it would be stored as U+FFFD, so `"a\ud800"` and `"a\udfff"` would
 * name the same user). Patterns run with the `u` flag, where a surrogate pair is one code
 * point outside the range and only a lone surrogate falls in it.
 */
export const Text = (maxLength: number, minLength = 1) => Type.String({ minLength, maxLength, pattern: '^[^\\u0000\\ud800-\\udfff]*$' })
