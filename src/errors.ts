/**
 * The one error registry. Every error the service answers with is declared here with
 * its status, machine code and (where the API reference, docs/api.md, fixes it) its exact message; the error
 * handler in `http/error-handler.ts` is the only place that turns them into bodies.
 */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message)
    this.name = 'ApiError'
  }
}

export interface ErrorBody {
  statusCode: number
  message: string
  code: string
}

const define =
  (statusCode: number, code: string, message: string, headers?: Record<string, string>) => (): ApiError =>
    new ApiError(statusCode, code, message, headers)

const MAX_ECHOED_PATH = 256

export const BEARER_CHALLENGE = { 'www-authenticate': 'Bearer error="invalid_token"' }
const ADMIN_CHALLENGE = { 'www-authenticate': 'Bearer realm="admin"' }

export const errors = {
  invalidApiCredentials: define(401, 'INVALID_API_CREDENTIALS', 'Invalid API credentials'),
  invalidExpiresIn: (detail: string) => new ApiError(400, 'INVALID_EXPIRES_IN', detail),
  agentNotFound: define(400, 'AGENT_NOT_FOUND', 'Agent not found or does not belong to your company'),
  defaultAgentRequired: define(400, 'AGENT_REQUIRED', 'agentId is required: the company has no default agent'),
  customerUserInactive: define(403, 'CUSTOMER_USER_INACTIVE', 'Customer user is inactive'),
  tokenNotFound: define(400, 'TOKEN_NOT_FOUND', 'Token not found or does not belong to your company'),
  tokenKeyUnknown: define(400, 'TOKEN_KEY_UNKNOWN', 'Token is signed with a key this node does not know (a key rotation under way?)'),
  // 409, not 429: waiting does not help (the place comes back only when a revoked token expires).
  revocationLimit: (limit: number) =>
    new ApiError(
      409,
      'REVOCATION_LIMIT',
      `The company has reached its limit of ${limit} live single-token revocations: invalidate the user (POST /rest/v1/auth/invalidate-token) or revoke the company's tokens instead`,
    ),
  // SPEC §7.3: a company's new users (a token for a userId it never used), bounded in rate
  // and in total; a token for an existing user is never refused by either.
  newUserRateLimited: (retryAfterSeconds: number) =>
    new ApiError(429, 'NEW_USER_RATE_LIMITED', 'Too many new users for this company; retry later (tokens for existing users are not limited)', {
      'retry-after': String(retryAfterSeconds),
    }),
  // 409, not 429: waiting does not help (users are never deleted).
  userLimit: (limit: number) => new ApiError(409, 'USER_LIMIT', `The company has reached its limit of ${limit} users`),
  customerUserNotFound: define(400, 'CUSTOMER_USER_NOT_FOUND', 'Customer user not found or does not belong to your company'),
  invalidAdminToken: define(401, 'INVALID_ADMIN_TOKEN', 'Invalid admin token', ADMIN_CHALLENGE),
  // SPEC §10.1: the caller is known, its role does not allow the call; nothing was done.
  insufficientRole: define(403, 'FORBIDDEN', 'Insufficient role'),
  // SPEC §10.3: a write from a console session without the session's anti-CSRF token.
  csrf: define(403, 'CSRF', 'Missing or wrong CSRF token'),
  notFound: (what: string) => new ApiError(404, 'NOT_FOUND', `${what} not found`),
  invalidDefaultAgent: define(400, 'INVALID_DEFAULT_AGENT', 'defaultAgentId must be an agent of this company'),
  validation: (message: string) => new ApiError(400, 'VALIDATION_ERROR', message),
  invalidJson: define(400, 'INVALID_JSON', 'Request body is not valid JSON'),
  emptyJson: define(400, 'INVALID_JSON', 'Request body is empty but content-type is application/json'),
  unsupportedMediaType: define(415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json'),
  payloadTooLarge: define(413, 'PAYLOAD_TOO_LARGE', 'Request body is too large'),
  headersTooLarge: define(431, 'HEADERS_TOO_LARGE', 'Request headers are too large'),
  malformedRequest: define(400, 'MALFORMED_REQUEST', 'Malformed HTTP request'),
  requestTimeout: define(408, 'REQUEST_TIMEOUT', 'Request not received in time'),
  routeNotFound: (method: string, url: string) => {
    const path = url.split('?')[0]!
    // A path is echoed only while it is short: an answer never repeats kilobytes of a URL.
    return new ApiError(404, 'ROUTE_NOT_FOUND', path.length <= MAX_ECHOED_PATH ? `Route ${method} ${path} not found` : `Route ${method} not found`)
  },
  rateLimited: (retryAfterSeconds: number) => new ApiError(429, 'RATE_LIMITED', 'Too many failed attempts', { 'retry-after': String(retryAfterSeconds) }),
  notFoundPath: define(404, 'ROUTE_NOT_FOUND', 'Not found'),
  unavailable: define(503, 'SERVICE_UNAVAILABLE', 'Service temporarily unavailable', { 'retry-after': '1' }),
  tooManyEventStreams: define(503, 'TOO_MANY_EVENT_STREAMS', 'Too many open event streams on this node', { 'retry-after': '5' }),
  // 429, not 503: the node has room; this company holds its whole share (SPEC §8.2).
  tooManyCompanyEventStreams: define(429, 'TOO_MANY_COMPANY_EVENT_STREAMS', 'Too many open event streams of this company on this node', { 'retry-after': '5' }),
  internal: define(500, 'INTERNAL_ERROR', 'Internal server error'),
}

/**
 * SPEC §9: the OAuth endpoints answer their errors as RFC 6749 §5.2 bodies,
 * `{"error", "error_description"?}`, not as the error body of §3 (an OAuth client reads
 * `error`). `oauthErrorOf` says what each of the registry's errors is to such a client.
 */
export class OAuthError extends Error {
  constructor(
    readonly statusCode: number,
    readonly error: string,
    readonly description?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(description ?? error)
    this.name = 'OAuthError'
  }
}

export interface OAuthErrorBody {
  error: string
  error_description?: string
}

export const BASIC_CHALLENGE = { 'www-authenticate': 'Basic realm="chat-auth"' }

export const oauthErrors = {
  invalidClient: () => new OAuthError(401, 'invalid_client', undefined, BASIC_CHALLENGE),
  invalidRequest: (description: string) => new OAuthError(400, 'invalid_request', description),
  unauthorizedClient: () => new OAuthError(400, 'unauthorized_client'),
}

/** What an error of the registry is to an OAuth client (README, "Decisions where the SPEC is silent"). */
export function oauthErrorOf(error: ApiError): OAuthError {
  switch (error.code) {
    case 'INVALID_API_CREDENTIALS':
      return oauthErrors.invalidClient()
    // SPEC §7.3's status and Retry-After; the client was not authenticated, so RFC 6749's code for that.
    case 'RATE_LIMITED':
      return new OAuthError(429, 'invalid_client', error.message, error.headers)
    // RFC 7009 §2.2.1: on a 503 the client assumes the token still valid and tries again later,
    // which is the truth while a key rotation has not reached this node.
    case 'TOKEN_KEY_UNKNOWN':
      return new OAuthError(503, 'temporarily_unavailable', error.message, { 'retry-after': '5' })
    case 'REVOCATION_LIMIT':
      return new OAuthError(409, 'revocation_limit', error.message)
    case 'UNSUPPORTED_MEDIA_TYPE':
      return oauthErrors.invalidRequest('Content-Type must be application/x-www-form-urlencoded')
    case 'INVALID_JSON':
      return oauthErrors.invalidRequest('The body must be application/x-www-form-urlencoded')
  }
  if (error.statusCode === 503) return new OAuthError(503, 'temporarily_unavailable', error.message, error.headers)
  // 413 and 408 keep their status: the body was not read, whatever it held.
  if (error.statusCode === 413 || error.statusCode === 408) return new OAuthError(error.statusCode, 'invalid_request', error.message, error.headers)
  if (error.statusCode >= 400 && error.statusCode < 500) return oauthErrors.invalidRequest(error.message)
  return new OAuthError(500, 'server_error')
}

/**
 * The verification denials of SPEC §3.3, in check order. They are data, not
 * exceptions: the verifier returns them on the hot path without building a stack.
 */
export const denials = {
  missingToken: { code: 'MISSING_BEARER_TOKEN', message: 'Missing bearer token' },
  invalidToken: { code: 'INVALID_TOKEN', message: 'Invalid token' },
  expired: { code: 'TOKEN_EXPIRED', message: 'Token has expired' },
  userNotFoundOrInactive: { code: 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE', message: 'Customer user not found or inactive' },
  revoked: { code: 'TOKEN_REVOKED', message: 'Token has been revoked' },
  companyMismatch: { code: 'TOKEN_COMPANY_MISMATCH', message: 'Token company mismatch' },
  agentInactive: { code: 'AGENT_INACTIVE', message: 'Agent is inactive' },
} as const

export type Denial = (typeof denials)[keyof typeof denials]

export function denialBody(denial: Denial): ErrorBody {
  return { statusCode: 401, message: denial.message, code: denial.code }
}

/** A store (PostgreSQL, PGlite, Redis) cannot answer: the caller answers 503, never allows. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'StoreUnavailableError'
  }
}
