import type { FastifyError, FastifyInstance, FastifyRequest } from 'fastify'
import { ApiError, errors, StoreUnavailableError, type ErrorBody } from '../errors.js'
import { throttledLog } from '../throttled-log.js'
import { presentedKeyId } from './credential-guard.js'

/**
 * The one place errors become responses: every error body is SPEC's
 * `{statusCode, message, code}`. 4xx are logged at info, 5xx at error and masked; a store
 * that is away fails every call alike, so its 503s are logged once per interval (each one is
 * counted in chat_auth_http_requests_total by status).
 */
export function installErrorHandling(fastify: FastifyInstance): void {
  const logAnswer = errorLog(fastify)
  fastify.setErrorHandler((error, request, reply) => {
    const apiError = toRouteError(error, request)
    logAnswer(request, error, apiError)
    return reply.code(apiError.statusCode).headers(apiError.headers).send(body(apiError))
  })
  fastify.setNotFoundHandler((request, reply) => {
    const apiError = errors.routeNotFound(request.method, request.url)
    return reply.code(404).send(body(apiError))
  })
}

/** The registry's error for what a route threw. */
export function toRouteError(error: unknown, request: FastifyRequest): ApiError {
  // The reference page's file server refuses a path that climbs out of its folder with a
  // 403 no document lists: to a caller it is a path like any other that is not there.
  return (error as FastifyError).code === 'FST_STATIC_FORBIDDEN_PATH' ? errors.routeNotFound(request.method, request.url) : toApiError(error as FastifyError)
}

/**
 * How an error answer is logged, whatever body it is sent with (the OAuth endpoints send
 * RFC 6749 bodies): 5xx at error (a store that is away once per 5 s), a node or company at
 * its bound at warn (once per 5 s), a refused credential at info with its keyId and client
 * address (SPEC §7.3, never the secret), other 4xx at info.
 */
export function errorLog(fastify: FastifyInstance): (request: FastifyRequest, error: unknown, apiError: ApiError) => void {
  const logUnavailable = throttledLog(fastify.log, Date.now, 'error')
  const logRefusal = throttledLog(fastify.log, Date.now, 'warn')
  return (request, error, apiError) => {
    const where = { reqId: request.id, method: request.method, route: request.routeOptions.url }
    if (CAPACITY_REFUSALS.has(apiError.code)) {
      // A node at its bounds is working as configured: worth a warning, not an error, and not one per refusal.
      logRefusal(`${apiError.message} (repeats within 5 s are not logged; chat_auth_http_requests_total counts them)`, { ...where, code: apiError.code, statusCode: apiError.statusCode })
    } else if (apiError.statusCode === 503) {
      logUnavailable('store unavailable (repeats within 5 s are not logged; chat_auth_http_requests_total counts them)', { ...where, err: error })
    } else if (apiError.statusCode >= 500) {
      request.log.error({ ...where, err: error }, 'unexpected error')
    } else if (CREDENTIAL_REFUSALS.has(apiError.code)) {
      // SPEC §7.3: an operator sees who is guessing, and at which key (never the secret).
      request.log.info({ ...where, code: apiError.code, statusCode: apiError.statusCode, clientAddress: request.ip, keyId: presentedKeyId(request) }, apiError.message)
    } else {
      request.log.info({ ...where, code: apiError.code, statusCode: apiError.statusCode }, apiError.message)
    }
  }
}

const CREDENTIAL_REFUSALS = new Set(['INVALID_API_CREDENTIALS', 'INVALID_ADMIN_TOKEN', 'RATE_LIMITED'])
/** a bound of the node or of a company's share reached: not a failure of anything */
const CAPACITY_REFUSALS = new Set(['TOO_MANY_EVENT_STREAMS', 'TOO_MANY_COMPANY_EVENT_STREAMS'])

export function body(error: ApiError): ErrorBody {
  return { statusCode: error.statusCode, message: error.message, code: error.code }
}

export function toApiError(error: FastifyError | Error): ApiError {
  if (error instanceof ApiError) return error
  if (error instanceof StoreUnavailableError) return errors.unavailable()
  const fastifyError = error as FastifyError
  if (fastifyError.validation) return errors.validation(fastifyError.message)
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return errors.payloadTooLarge()
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return errors.unsupportedMediaType()
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return errors.emptyJson()
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return errors.invalidJson()
    // An id longer than any id could be: not found (SPEC §2), without echoing the URL.
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return errors.notFoundPath()
  }
  const status = fastifyError.statusCode
  if (error instanceof SyntaxError && status === 400) return errors.invalidJson()
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code = typeof fastifyError.code === 'string' ? fastifyError.code.replace(/^FST_ERR_/, '').toUpperCase() : 'BAD_REQUEST'
    return new ApiError(status, code, fastifyError.message)
  }
  return errors.internal()
}
