import formBody from '@fastify/formbody'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { OAuthClient, OAuthService } from '../auth/oauth.js'
import { ApiError, OAuthError, oauthErrorOf, oauthErrors, type OAuthErrorBody } from '../errors.js'
import { basicUserPass, bounded, type ApiKeyPair } from '../http/basic-credentials.js'
import type { CredentialGuard } from '../http/credential-guard.js'
import { errorLog, toRouteError } from '../http/error-handler.js'

export const INTROSPECT_PATH = '/oauth2/introspect'
export const REVOKE_PATH = '/oauth2/revoke'

/**
 * The form both endpoints take (RFC 7662 §2.1, RFC 7009 §2.1). Parameters we do not know
 * are ignored (RFC 6749 §3.2); `token_type_hint` is accepted and ignored (we issue one kind).
 * The token is not bounded here: one longer than any we sign is simply not ours (inactive,
 * or 200 on revocation); the body limit bounds it.
 */
const TokenForm = Type.Object({
  token: Type.String({ minLength: 1, description: 'the token (a JWT issued by POST /rest/v1/auth/token)' }),
  token_type_hint: Type.Optional(Type.String({ description: 'accepted and ignored' })),
  client_id: Type.Optional(Type.String({ description: 'the keyId, when the key is not sent as HTTP Basic' })),
  client_secret: Type.Optional(Type.String({ description: 'the keySecret, when the key is not sent as HTTP Basic' })),
})

const OAuthErrorSchema = (description: string) =>
  Type.Object({ error: Type.String(), error_description: Type.Optional(Type.String()) }, { description })

const OAUTH_ERRORS = {
  400: OAuthErrorSchema('`invalid_request`: not a form, `token` missing or empty, a parameter repeated, or two client authentications; (revoke) `unauthorized_client`: a valid token of another company'),
  401: OAuthErrorSchema('`invalid_client`: no API key, or a wrong one (with `WWW-Authenticate: Basic realm="chat-auth"`)'),
  413: OAuthErrorSchema('`invalid_request`: the body is over the body limit'),
  429: OAuthErrorSchema('`invalid_client`: too many failed credential attempts from this address or on this key; see Retry-After'),
  503: OAuthErrorSchema('`temporarily_unavailable`: a store cannot answer (or, on revoke, the token names a signing key this node does not know yet); see Retry-After'),
}

/** The 200 answer as the API description gives it: every field optional but `active` (test/in-process/verify/introspection-answer.test.ts holds the server's and the client's types to it). */
export const IntrospectionResponse = Type.Object(
  {
    active: Type.Boolean(),
    sub: Type.Optional(Type.String({ description: 'the customer user id' })),
    exp: Type.Optional(Type.Integer()),
    iat: Type.Optional(Type.Integer()),
    jti: Type.Optional(Type.String()),
    token_type: Type.Optional(Type.Literal('Bearer')),
    client_id: Type.Optional(Type.String({ description: 'the keyId that asked' })),
    iss: Type.Optional(Type.String()),
    aud: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
    company_id: Type.Optional(Type.String()),
    agent_id: Type.Optional(Type.String()),
    token_version: Type.Optional(Type.Integer()),
    ext_id: Type.Optional(Type.String({ description: "the customer user's externalId" })),
  },
  { description: '`{"active": false}` and nothing more for any token that is not active for this key; every field for one that is' },
)

export interface OAuthRoutesOptions {
  credentials: Pick<CredentialGuard, 'apiKey'>
  oauth: OAuthService
}

/**
 * SPEC §9.1 and §9.2: `POST /oauth2/introspect` (RFC 7662) and `POST /oauth2/revoke`
 * (RFC 7009), in a context of their own: form bodies only (@fastify/formbody, here and
 * nowhere else: every other endpoint takes JSON alone), and RFC 6749 §5.2 error bodies.
 */
export const oauthRoutes: FastifyPluginAsyncTypebox<OAuthRoutesOptions> = async (fastify, { credentials, oauth }) => {
  fastify.removeAllContentTypeParsers()
  await fastify.register(formBody)
  answerErrorsAsOAuth(fastify)
  // RFC 6749 §5.1 and RFC 7662 §2.2: what is said about a token is never cached.
  fastify.addHook('onRequest', async (_request, reply) => {
    reply.header('cache-control', 'no-store')
  })
  // RFC 6749 §3.2: parameters must not repeat (fast-querystring makes an array of a repeated one).
  fastify.addHook('preValidation', async (request) => {
    const form = request.body as Record<string, unknown> | undefined
    const repeated = form === undefined || form === null ? undefined : Object.keys(form).find((name) => Array.isArray(form[name]))
    if (repeated !== undefined) throw oauthErrors.invalidRequest(`parameter repeated: ${repeated.slice(0, 64)}`)
  })

  fastify.post(
    INTROSPECT_PATH,
    { schema: { consumes: ['application/x-www-form-urlencoded'], body: TokenForm, response: { 200: IntrospectionResponse, ...OAUTH_ERRORS } } },
    async (request) => {
      const client = await authenticateClient(credentials, request, request.body)
      return oauth.introspect(client, request.body.token)
    },
  )

  fastify.post(
    REVOKE_PATH,
    {
      schema: {
        consumes: ['application/x-www-form-urlencoded'],
        body: TokenForm,
        response: {
          200: { description: 'Revoked, or not a token at all (malformed, unknown, expired): an empty body either way', type: 'null' },
          ...OAUTH_ERRORS,
          409: OAuthErrorSchema("`revocation_limit`: the company holds its limit of live single-token revocations; invalidate the user or revoke the company's tokens instead"),
        },
      },
    },
    async (request, reply) => {
      const client = await authenticateClient(credentials, request, request.body)
      // Resolves only once every node refuses the token (SPEC §7.1's guarantee).
      await oauth.revoke(client, request.body.token)
      // No payload at all: an empty body (a null payload would be serialised as `null`).
      return reply.code(200).send(undefined as never)
    },
  )
}

/**
 * RFC 6749 §2.3.1: the API key as HTTP Basic (each part form-encoded first, as OAuth
 * clients send it) or as `client_id` / `client_secret`, never both. No key, or a wrong one,
 * is 401 `invalid_client` through the guard, which counts it (SPEC §7.3).
 */
async function authenticateClient(credentials: Pick<CredentialGuard, 'apiKey'>, request: FastifyRequest, form: { client_id?: string; client_secret?: string }): Promise<OAuthClient> {
  const pair = presentedPair(request.headers.authorization, form)
  const key = await credentials.apiKey(request, pair.keyId, pair.keySecret)
  return { companyId: key.companyId, keyId: key.keyId }
}

function presentedPair(authorization: string | undefined, form: { client_id?: string; client_secret?: string }): ApiKeyPair {
  if (authorization !== undefined) {
    if (form.client_secret !== undefined) throw oauthErrors.invalidRequest('more than one client authentication: HTTP Basic and client_secret')
    const basic = basicUserPass(authorization)
    if (basic === undefined) return bounded('', '')
    const pair = bounded(formDecoded(basic.user), formDecoded(basic.pass))
    // A client_id beside Basic must name the same client.
    if (form.client_id !== undefined && form.client_id !== pair.keyId) throw oauthErrors.invalidRequest('client_id differs from the HTTP Basic user')
    return pair
  }
  return bounded(form.client_id ?? '', form.client_secret ?? '')
}

/** application/x-www-form-urlencoded decoding; text that is not such (a stray %) stays as it is. */
function formDecoded(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '))
  } catch {
    return text
  }
}

/** Errors of this context as RFC 6749 §5.2 bodies, logged as every other error answer is. */
function answerErrorsAsOAuth(fastify: FastifyInstance): void {
  const logAnswer = errorLog(fastify)
  fastify.setErrorHandler((error, request, reply) => {
    const apiError = error instanceof OAuthError ? new ApiError(error.statusCode, error.error.toUpperCase(), error.description ?? error.error) : toRouteError(error, request)
    logAnswer(request, error, apiError)
    const answer = error instanceof OAuthError ? error : oauthErrorOf(apiError)
    const body: OAuthErrorBody = answer.description === undefined ? { error: answer.error } : { error: answer.error, error_description: answer.description }
    return reply.code(answer.statusCode).headers(answer.headers).send(body)
  })
}
