import { VERSION } from '../version.js'
import type { FastifyInstance } from 'fastify'
import fastifySwagger, { type FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import fastifySwaggerUi from '@fastify/swagger-ui'
import { errorBody } from './schemas.js'

/** Where the API description and its reference page are served. */
export const OPENAPI_PATH = '/openapi.json'
export const DOCS_PATH = '/docs'

const ADMIN_PREFIX = '/admin/v1/'
const CONSOLE_API_PREFIX = '/console/api/'
const EVENTS_PATH = '/rest/v1/auth/events'
const OAUTH_PREFIX = '/oauth2/'
const OAUTH_CLIENT_AUTH =
  'Client authentication: the API key as HTTP Basic (`keyId:keySecret`, each part form-encoded as RFC 6749 §2.3.1 says; plain ids and secrets are the same encoded) or as the `client_id` and `client_secret` form fields, never both. Errors are RFC 6749 §5.2 bodies, `{"error", "error_description"?}`.'

/**
 * What each endpoint does, for the reference page; keyed by `METHOD url` as the route is
 * registered. A route may say it in its own schema instead (`summary`, `description`,
 * `security`: the verify endpoint's, routes/verify/route.ts).
 */
const OPERATIONS: Record<string, { summary: string; description?: string }> = {
  'POST /rest/v1/auth/token': {
    summary: 'Issue a token for an end user',
    description:
      "Authenticated by an API key of the company. Finds the end user by `userId` (your id of the user) or creates it; `agentId` defaults to the user's current agent, then to the company's default agent. A new user only within the company's limits: past NEW_USERS_BURST and NEW_USERS_PER_MINUTE, 429 `NEW_USER_RATE_LIMITED` with `Retry-After`; at MAX_USERS_PER_COMPANY, 409 `USER_LIMIT`. Tokens for existing users are never limited by these.",
  },
  'POST /rest/v1/auth/invalidate-token': {
    summary: 'Revoke every token of one end user',
    description: "Raises the user's token version; answers once every node refuses the older tokens.",
  },
  'POST /rest/v1/auth/revoke-token': {
    summary: 'Revoke one token (log out one device)',
    description:
      "Revokes the token's `jti` until its own expiry; the user's other tokens stay valid. Idempotent. A company holds at most MAX_LIVE_TOKEN_REVOCATIONS live revocations: past it a new one is 409 `REVOCATION_LIMIT` (a repeat still answers 200).",
  },
  [`GET ${EVENTS_PATH}`]: {
    summary: "Stream the company's events (Server-Sent Events)",
    description:
      "Authenticated by an API key of the company as HTTP Basic (`keyId:keySecret`). The company's events, oldest first, then live: an event that ends sessions is written before the node acknowledges its change. Resume with `Last-Event-ID` (or `after`): every event committed since, once, in commit order; a cursor too old or not of this company gets `event: reset`. At most MAX_EVENT_STREAMS per node (then 503).",
  },
  'POST /oauth2/introspect': {
    summary: 'Token introspection (RFC 7662)',
    description:
      "For a resource server or proxy that speaks OAuth. `{\"active\": true, …}` for a token that passes every check of the verify endpoint and belongs to the asking key's company; `{\"active\": false}` and nothing more for anything else (malformed, expired, revoked by any scope, inactive user or agent, another company's token). 200 either way; `Cache-Control: no-store`. " +
      OAUTH_CLIENT_AUTH,
  },
  'POST /oauth2/revoke': {
    summary: 'Token revocation (RFC 7009)',
    description:
      "Revokes the token as `POST /rest/v1/auth/revoke-token` does, and answers once every node refuses it: 200 with an empty body. A malformed, unknown or expired token also answers 200 (RFC 7009 §2.2); a valid token of another company is 400 `unauthorized_client`, and nothing changes. " +
      OAUTH_CLIENT_AUTH,
  },
  'GET /healthz': { summary: 'Liveness: the process answers' },
  'GET /readyz': { summary: 'Readiness: the database answers and the node can vouch for its cache' },
  'GET /metrics': { summary: 'Prometheus metrics (text format)' },
  'GET /.well-known/jwks.json': { summary: 'Public keys of the asymmetric signing keys (JWKS)' },
  'POST /admin/v1/companies': { summary: 'Create a company' },
  'GET /admin/v1/companies/:companyId': { summary: 'Get a company' },
  'GET /admin/v1/companies/:companyId/usage': {
    summary: "A company's users and new users against its limits",
    description:
      'How near the company is to the limits on what one company may hold (SPEC §7.3): `users` against `maxUsers` (MAX_USERS_PER_COMPANY; past it a new user is 409 `USER_LIMIT`), `newUsersAvailable`, the new users it may create at once now (refilled at `newUsersPerMinute` up to `newUsersBurst`; at 0 a new user is 429 `NEW_USER_RATE_LIMITED`), and `liveTokenRevocations` against `maxLiveTokenRevocations`. Tokens for existing users are never limited.',
  },
  'PATCH /admin/v1/companies/:companyId': { summary: "Rename a company or change its default agent" },
  'POST /admin/v1/companies/:companyId/agents': { summary: "Create an agent (the company's first becomes its default)" },
  'PATCH /admin/v1/agents/:agentId': { summary: 'Rename, activate or deactivate an agent' },
  'POST /admin/v1/companies/:companyId/api-keys': { summary: 'Create an API key (the only time its secret is shown)' },
  'GET /admin/v1/companies/:companyId/api-keys': { summary: "List a company's API keys (never a secret)" },
  'DELETE /admin/v1/api-keys/:keyId': { summary: 'Revoke an API key (idempotent)' },
  'GET /admin/v1/customer-users/:customerUserId': { summary: 'Get an end user' },
  'PATCH /admin/v1/customer-users/:customerUserId': { summary: 'Activate or deactivate an end user' },
  'POST /admin/v1/companies/:companyId/revoke-tokens': { summary: 'Revoke every token of a company issued so far' },
  'POST /admin/v1/agents/:agentId/revoke-tokens': { summary: 'Revoke every token of an agent issued so far' },
  'GET /admin/v1/companies/:companyId/events': { summary: "List a company's events (audit trail), newest first" },
  'POST /admin/v1/companies/:companyId/webhooks': {
    summary: "Add a webhook endpoint for the company's events (the only time its secret is shown)",
    description:
      'Each event of the company (of `types`, when given) is POSTed to `url` as JSON (the event as the events listing shows it, plus `companyId`), signed per the Standard Webhooks specification (`webhook-id`: the event id, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>` with the `whsec_` secret). At least once: a non-2xx (a redirect included: it is not followed), no answer within 5 s or a refused connection is retried with exponential backoff (WEBHOOK_RETRY_BASE_MS, doubling, at most an hour apart) for at least 24 h. Only http: and https: URLs.',
  },
  'GET /admin/v1/companies/:companyId/webhooks': { summary: "List a company's webhook endpoints (never a secret)" },
  'DELETE /admin/v1/webhooks/:webhookId': { summary: 'Delete a webhook endpoint: nothing more is sent to it' },
  'GET /admin/v1/webhooks/:webhookId/deliveries': { summary: "An endpoint's latest deliveries, newest event first, each as its last attempt left it" },
  'POST /admin/v1/webhook-deliveries/:deliveryId/redeliver': { summary: "Queue a delivery's event again for its endpoint, due now (operator)" },
  'POST /admin/v1/operators': { summary: 'Create a named operator with a role (the only time its token is shown)' },
  'GET /admin/v1/operators': { summary: 'List the operators (never a token)' },
  'DELETE /admin/v1/operators/:operatorId': { summary: 'Revoke an operator: its token and console sessions are refused on every node at once (idempotent)' },
  'GET /admin/v1/companies': { summary: 'Search companies by name (contains, any case), ordered by name, a page at a time' },
  'GET /admin/v1/customer-users': { summary: "Find an end user by its company and external id (your customer's id of it)" },
  'POST /admin/v1/customer-users/:customerUserId/invalidate': { summary: 'Revoke every token of one end user, with the receipt (operator)' },
  'POST /admin/v1/tokens/revoke': {
    summary: "Revoke one token of any company, with the receipt (operator)",
    description: "As `POST /rest/v1/auth/revoke-token`, for a token of any company that carries a valid signature; the company's MAX_LIVE_TOKEN_REVOCATIONS applies. An already revoked or expired token answers 200 with `receipt: null`.",
  },
  'GET /admin/v1/companies/:companyId/revoke-tokens/preview': { summary: "What revoking a company's tokens would end: its active users, and the open sessions across the live nodes" },
  'GET /admin/v1/agents/:agentId/revoke-tokens/preview': { summary: "What revoking an agent's tokens would end: its active users, and the open sessions across the live nodes" },
  'GET /admin/v1/nodes': { summary: 'Every live node: readiness, bus trust, how far behind, cache, sessions, streams, clock offset' },
  'POST /console/api/session': {
    summary: "Sign in to the console: an operator's token (or ADMIN_TOKEN) for a session cookie",
    description:
      'Sets `chat_auth_console` (HttpOnly, SameSite=Strict, Path=/, Secure over HTTPS). The answer\'s `csrf` goes with every write as `x-csrf-token`. The session ends after CONSOLE_SESSION_IDLE unused, 12 h after sign-in, at sign-out, or when its operator is revoked. Failed tokens count towards AUTH_FAILURE_LIMIT.',
  },
  'GET /console/api/session': { summary: "The console session the cookie names: role, name and anti-CSRF token" },
  'DELETE /console/api/session': { summary: 'Sign out: the session ends on every node (needs x-csrf-token)' },
}

interface RouteSchema {
  body?: unknown
  response?: Record<string, unknown>
  hide?: boolean
  [key: string]: unknown
}

/**
 * Registers the OpenAPI 3.1 description (generated by @fastify/swagger from every route's
 * own TypeBox schemas, so it cannot drift from what the routes validate and answer) at
 * `/openapi.json`, and Swagger UI at `/docs`, served from the package: no CDN. Must be
 * registered before the routes: @fastify/swagger collects them as they are added.
 */
export async function registerOpenApi(fastify: FastifyInstance): Promise<void> {
  await fastify.register(fastifySwagger, swaggerOptions())
  await fastify.register(fastifySwaggerUi, { routePrefix: DOCS_PATH, uiConfig: { deepLinking: true, docExpansion: 'list' } })
  fastify.get(OPENAPI_PATH, { schema: { hide: true } }, async () => fastify.swagger())
}

function swaggerOptions(): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'chat-auth — chat token gateway',
        version: VERSION,
        description:
          'Issues signed chat JWTs for the end users of your customer companies, verifies them on every chat request, and revokes them: one user, one token, a whole company or agent. Every error answers `{statusCode, message, code}`.',
      },
      tags: [
        { name: 'tokens', description: 'Issue, verify and revoke tokens (API key in the body)' },
        { name: 'oauth', description: 'Token introspection and revocation for standard OAuth tooling (RFC 7662, RFC 7009; API key as client credentials)' },
        { name: 'admin', description: "Companies, agents, API keys, end users, events, webhooks, operators and nodes (ADMIN_TOKEN, an operator's token, or a console session; each route needs a role: viewer, operator or admin)" },
        { name: 'console', description: "The operators' console's session (same origin, a cookie)" },
        { name: 'operations', description: 'Health, readiness, metrics and public keys' },
      ],
      components: {
        securitySchemes: {
          adminToken: { type: 'http', scheme: 'bearer', description: "The ADMIN_TOKEN of the deployment (role admin), or an operator's token (`opt_…`, with the operator's role)" },
          consoleSession: { type: 'apiKey', in: 'cookie', name: 'chat_auth_console', description: 'A console session (POST /console/api/session); a write also sends the session\'s anti-CSRF token as `x-csrf-token`' },
          chatToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A token issued by POST /rest/v1/auth/token' },
          apiKeyBasic: { type: 'http', scheme: 'basic', description: 'An API key of the company: keyId as the user name, keySecret as the password' },
        },
      },
    },
    transform: ({ schema, url, route }) => ({ schema: describe((schema ?? {}) as RouteSchema, url, route.method), url }),
  }
}

/**
 * Adds what the framework, not the route, answers: the admin guard's 401 and 429, and the
 * body parser's 400, 413 and 415; plus summary, tag and security scheme.
 */
function describe(schema: RouteSchema, url: string, method: string | string[]): RouteSchema {
  if (schema.hide) return schema
  const methods = typeof method === 'string' ? [method] : method
  const operation = OPERATIONS[`${methods[0]} ${url}`]
  const isAdmin = url.startsWith(ADMIN_PREFIX)
  const isOAuth = url.startsWith(OAUTH_PREFIX)
  const isConsole = url.startsWith(CONSOLE_API_PREFIX)
  const errors: Record<string, unknown> = {}
  // SPEC §10.1: every admin route needs a role (and a console session's write its CSRF token).
  if (isAdmin) Object.assign(errors, { 401: errorBody(401), 403: errorBody(403), 429: errorBody(429) })
  // The OAuth routes list their own (RFC 6749) error bodies, the body parser's among them.
  if (schema.body !== undefined && !isOAuth) Object.assign(errors, { 400: errorBody(400), 413: errorBody(413), 415: errorBody(415) })
  return {
    ...schema,
    ...operation,
    tags: [isAdmin ? 'admin' : isOAuth ? 'oauth' : isConsole ? 'console' : url.startsWith('/rest/') ? 'tokens' : 'operations'],
    ...(schema.security !== undefined ? {} : isAdmin ? { security: [{ adminToken: [] }, { consoleSession: [] }] } : isConsole && !(methods[0] === 'POST') ? { security: [{ consoleSession: [] }] } : url === EVENTS_PATH || isOAuth ? { security: [{ apiKeyBasic: [] }] } : {}),
    response: { ...errors, ...described(schema.response ?? { 200: {} }) },
  }
}

const SUCCESS_MEANINGS: Record<string, string> = { 200: 'OK', 201: 'Created' }

/** Success answers say what they are; error answers already do (`errorResponses`). */
function described(responses: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(responses).map(([status, schema]) => {
      const own = schema as { description?: string }
      return [status, own.description === undefined ? { ...own, description: SUCCESS_MEANINGS[status] ?? 'Answer' } : own]
    }),
  )
}

