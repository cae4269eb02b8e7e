/**
 * `chat-auth-gateway/client`: a typed client of the gateway's HTTP API over the global
 * fetch. It imports nothing of the server and no package.
 *
 * Retries (on no answer, a timeout, 502, 503 or 504; `retries` more attempts, waiting as
 * Retry-After says or 100 ms doubling) only where sending the call twice is harmless:
 * `verify`, `revokeToken` (idempotent: revoking a revoked token answers 200 again), every
 * admin read (`listWebhookDeliveries` too), `updateCompany`/`updateAgent`/`updateCustomerUser` (they set values, not
 * steps) and `revokeApiKey` (idempotent). Never `issueToken` (a second token and possibly a
 * second user), `invalidate` (a second increment would also revoke tokens issued in
 * between), the `create*` calls (a second company, agent, key or webhook), `deleteWebhook` (a
 * repeat answers 404), nor
 * `revokeCompanyTokens`/`revokeAgentTokens` (a later cut-off would also revoke tokens
 * issued in between). A write that answered 503 may still have been applied: the gateway
 * could not confirm that every node has seen it; look before you repeat it.
 *
 * A redirect is never followed (REDIRECT_REFUSED) and an answer never read past
 * `maxResponseBytes` (RESPONSE_TOO_LARGE): see response.ts. Neither is retried.
 *
 * `oauth.introspect` and `oauth.revoke` call the OAuth endpoints (RFC 7662, RFC 7009) with
 * the API key as client credentials; both are retried (a read; a revocation is idempotent).
 * Their errors carry RFC 6749's code (`invalid_client`, `unauthorized_client`, …) as `code`.
 */
import { isVerified } from './answers.js'
import { describe, invalidArgument, pathSegment } from './input.js'
import { checkCredentials, type ClientOptions } from './options.js'
import { Transport, type Call } from './transport.js'
import type {
  Agent,
  AgentTokensRevoked,
  ApiKey,
  AuditEvent,
  Company,
  CompanyTokensRevoked,
  Introspection,
  CreatedApiKey,
  CreatedWebhook,
  CustomerUser,
  EventPage,
  EventType,
  IssuedToken,
  RevokedApiKey,
  TokenRevoked,
  TokensInvalidated,
  Verified,
  Webhook,
  WebhookDelivery,
} from './types.js'

export { ChatAuthError, CLIENT_CODES } from './errors.js'
export type * from './types.js'
export type { ClientOptions, TransportOptions } from './options.js'

/** Options of one call. */
export interface CallOptions {
  /** aborts the call (and its retries) */
  signal?: AbortSignal
}

/** An id as one path segment; not a string, or not well-formed text, is INVALID_ARGUMENT. */
const id = (value: string) => pathSegment(value, 'an id')

export class ChatAuthClient {
  /** The admin API (needs `adminToken`, or `session` in the console's page). */
  readonly admin: AdminClient
  /** The OAuth endpoints, for code that speaks RFC 7662 and RFC 7009 (needs `apiKey`). */
  readonly oauth: OAuthCalls
  private readonly transport: Transport
  private readonly apiKey: ClientOptions['apiKey']

  /** Throws a TypeError naming the option, should one be wrong (see ChatAuthError). */
  constructor(options: ClientOptions) {
    this.transport = new Transport(options)
    checkCredentials(options)
    this.apiKey = options.apiKey
    this.admin = new AdminClient(this.transport, options.session === undefined ? options.adminToken : { csrf: options.session.csrf })
    this.oauth = new OAuthCalls(this.transport, options.apiKey)
  }

  /** POST /rest/v1/auth/token: a token for your end user `userId`. Not retried. */
  async issueToken(request: { userId: string; agentId?: string; expiresIn?: string }, options: CallOptions = {}): Promise<IssuedToken> {
    return await this.transport.send({ method: 'POST', path: '/rest/v1/auth/token', body: { ...this.credentials(), ...request }, idempotent: false, signal: options.signal })
  }

  /** POST /rest/v1/auth/invalidate-token: every token of one user stops working. Not retried. */
  async invalidate(customerUserId: string, options: CallOptions = {}): Promise<TokensInvalidated> {
    return await this.transport.send({ method: 'POST', path: '/rest/v1/auth/invalidate-token', body: { ...this.credentials(), customerUserId }, idempotent: false, signal: options.signal })
  }

  /**
   * POST /rest/v1/auth/revoke-token: this one token stops working (log out one device).
   * Retried. 409 `REVOCATION_LIMIT` (not retried): the company holds its limit of live
   * revocations (MAX_LIVE_TOKEN_REVOCATIONS); `invalidate` the user instead.
   */
  async revokeToken(token: string, options: CallOptions = {}): Promise<TokenRevoked> {
    return await this.transport.send({ method: 'POST', path: '/rest/v1/auth/revoke-token', body: { ...this.credentials(), token }, idempotent: true, signal: options.signal })
  }

  /**
   * GET /rest/v1/auth/verify: the token's identity, or a {@link ChatAuthError} with status
   * 401 and the denial's `code` (`TOKEN_REVOKED`, `TOKEN_EXPIRED`, …). Resolves only with a
   * 200 carrying the identity (anything else: PROTOCOL_ERROR); a token no header can carry is
   * INVALID_ARGUMENT, sent nowhere. Retried.
   */
  verify(token: string, options: CallOptions = {}): Promise<Verified> {
    const expect = { status: 200, matches: isVerified, what: 'the identity of a token' }
    return this.transport.send({ method: 'GET', path: '/rest/v1/auth/verify', bearer: token, idempotent: true, signal: options.signal, expect })
  }

  private credentials(): { keyId: string; keySecret: string } {
    if (this.apiKey === undefined) throw new TypeError('this call needs the client option apiKey: { keyId, keySecret }')
    return { keyId: this.apiKey.keyId, keySecret: this.apiKey.keySecret }
  }
}

/**
 * The OAuth endpoints, with the API key sent as the `client_id` and `client_secret` form
 * fields. Every call is async, so that a token that is not a string rejects
 * (INVALID_ARGUMENT) like any other failure instead of throwing.
 */
export class OAuthCalls {
  constructor(
    private readonly transport: Transport,
    private readonly apiKey: ClientOptions['apiKey'],
  ) {}

  /**
   * POST /oauth2/introspect: `{active: true, sub, exp, …}` for a token that passes every
   * check of verification and belongs to the key's company; `{active: false}` for anything
   * else (malformed, expired, revoked, inactive, another company's). Retried.
   */
  async introspect(token: string, options: CallOptions = {}): Promise<Introspection> {
    return this.send('/oauth2/introspect', token, false, options)
  }

  /**
   * POST /oauth2/revoke: resolves once every node refuses the token, and also for a
   * malformed, unknown or expired one (RFC 7009 §2.2); another company's valid token
   * rejects with 400 `unauthorized_client`. Retried (revoking twice is harmless).
   */
  async revoke(token: string, options: CallOptions = {}): Promise<void> {
    await this.send('/oauth2/revoke', token, true, options)
  }

  private send<T>(path: string, token: string, emptyAnswer: boolean, options: CallOptions): Promise<T> {
    if (this.apiKey === undefined) return Promise.reject(new TypeError('this call needs the client option apiKey: { keyId, keySecret }'))
    if (typeof token !== 'string') return Promise.reject(invalidArgument(`the token must be a string, not ${describe(token)}`))
    const form = { token, client_id: this.apiKey.keyId, client_secret: this.apiKey.keySecret }
    return this.transport.send<T>({ method: 'POST', path, form, oauth: { emptyAnswer }, idempotent: true, signal: options.signal })
  }
}

/**
 * The admin API (`/admin/v1/…`, `Authorization: Bearer <ADMIN_TOKEN or operator token>`, or
 * the console's session cookie and anti-CSRF token). Every call is async, so that a bad id
 * rejects (INVALID_ARGUMENT) like any other failure instead of throwing.
 */
export class AdminClient {
  constructor(
    private readonly transport: Transport,
    /** a bearer token, or the console session's anti-CSRF token (the cookie is the browser's) */
    private readonly caller: string | { csrf: string } | undefined,
  ) {}

  async createCompany(body: { name: string }, options: CallOptions = {}): Promise<Company> {
    return this.send({ method: 'POST', path: '/admin/v1/companies', body, idempotent: false }, options)
  }

  async getCompany(companyId: string, options: CallOptions = {}): Promise<Company> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}`, idempotent: true }, options)
  }

  async updateCompany(companyId: string, body: { name?: string; defaultAgentId?: string }, options: CallOptions = {}): Promise<Company> {
    return this.send({ method: 'PATCH', path: `/admin/v1/companies/${id(companyId)}`, body, idempotent: true }, options)
  }

  /** The company's first agent becomes its default agent. */
  async createAgent(companyId: string, body: { name: string; active?: boolean }, options: CallOptions = {}): Promise<Agent> {
    return this.send({ method: 'POST', path: `/admin/v1/companies/${id(companyId)}/agents`, body, idempotent: false }, options)
  }

  /** The company's agents, by name. */
  async listAgents(companyId: string, options: CallOptions = {}): Promise<Agent[]> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}/agents`, idempotent: true }, options)
  }

  /** Deactivation takes effect on every node before this resolves. */
  async updateAgent(agentId: string, body: { name?: string; active?: boolean }, options: CallOptions = {}): Promise<Agent> {
    return this.send({ method: 'PATCH', path: `/admin/v1/agents/${id(agentId)}`, body, idempotent: true }, options)
  }

  /** The answer holds the key's secret: the only time it is shown. */
  async createApiKey(companyId: string, body: { name?: string } = {}, options: CallOptions = {}): Promise<CreatedApiKey> {
    return this.send({ method: 'POST', path: `/admin/v1/companies/${id(companyId)}/api-keys`, body, idempotent: false }, options)
  }

  async listApiKeys(companyId: string, options: CallOptions = {}): Promise<ApiKey[]> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}/api-keys`, idempotent: true }, options)
  }

  async revokeApiKey(keyId: string, options: CallOptions = {}): Promise<RevokedApiKey> {
    return this.send({ method: 'DELETE', path: `/admin/v1/api-keys/${id(keyId)}`, idempotent: true }, options)
  }

  async getCustomerUser(customerUserId: string, options: CallOptions = {}): Promise<CustomerUser> {
    return this.send({ method: 'GET', path: `/admin/v1/customer-users/${id(customerUserId)}`, idempotent: true }, options)
  }

  /** Deactivation takes effect on every node before this resolves. */
  async updateCustomerUser(customerUserId: string, body: { active: boolean }, options: CallOptions = {}): Promise<CustomerUser> {
    return this.send({ method: 'PATCH', path: `/admin/v1/customer-users/${id(customerUserId)}`, body, idempotent: true }, options)
  }

  /** Every token of the company issued before this resolves stops working; later ones are valid. Not retried. */
  async revokeCompanyTokens(companyId: string, options: CallOptions = {}): Promise<CompanyTokensRevoked> {
    return this.send({ method: 'POST', path: `/admin/v1/companies/${id(companyId)}/revoke-tokens`, idempotent: false }, options)
  }

  /** Every token of the agent issued before this resolves stops working; later ones are valid. Not retried. */
  async revokeAgentTokens(agentId: string, options: CallOptions = {}): Promise<AgentTokensRevoked> {
    return this.send({ method: 'POST', path: `/admin/v1/agents/${id(agentId)}/revoke-tokens`, idempotent: false }, options)
  }

  /**
   * One page of the company's events, newest first (`limit` 1–500, default 100); or, with
   * `after` (a page's `cursor`), what committed since, oldest first, and a new `cursor`:
   * polling with it misses nothing (SPEC §7.2).
   */
  async listEvents(companyId: string, page: { limit?: number; before?: string; after?: string } = {}, options: CallOptions = {}): Promise<EventPage> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}/events`, query: { limit: page.limit, before: page.before, after: page.after }, idempotent: true }, options)
  }

  /** Every event of the company, newest first, page by page as the loop asks for them. */
  async *events(companyId: string, page: { limit?: number } = {}, options: CallOptions = {}): AsyncGenerator<AuditEvent> {
    let before: string | undefined
    do {
      const { events, next } = await this.listEvents(companyId, { limit: page.limit, before }, options)
      yield* events
      before = next ?? undefined
    } while (before !== undefined)
  }

  /**
   * A webhook endpoint for the company's events (of `types`, when given): POSTed as JSON,
   * signed per Standard Webhooks. The answer holds its secret, the only time it is shown.
   * Not retried (a second endpoint would get every event twice).
   */
  async createWebhook(companyId: string, body: { url: string; types?: EventType[] }, options: CallOptions = {}): Promise<CreatedWebhook> {
    return this.send({ method: 'POST', path: `/admin/v1/companies/${id(companyId)}/webhooks`, body, idempotent: false }, options)
  }

  async listWebhooks(companyId: string, options: CallOptions = {}): Promise<Webhook[]> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}/webhooks`, idempotent: true }, options)
  }

  /** Nothing more is sent to it. Not retried: a repeat answers 404 (NOT_FOUND). */
  async deleteWebhook(webhookId: string, options: CallOptions = {}): Promise<Webhook> {
    return this.send({ method: 'DELETE', path: `/admin/v1/webhooks/${id(webhookId)}`, idempotent: false }, options)
  }

  /** The endpoint's latest deliveries, newest event first (`limit` 1–500, default 100). */
  async listWebhookDeliveries(webhookId: string, page: { limit?: number } = {}, options: CallOptions = {}): Promise<WebhookDelivery[]> {
    return this.send({ method: 'GET', path: `/admin/v1/webhooks/${id(webhookId)}/deliveries`, query: { limit: page.limit }, idempotent: true }, options)
  }

  private send<T>(call: Omit<Call, 'bearer' | 'signal' | 'headers' | 'credentials'>, options: CallOptions): Promise<T> {
    const caller = this.caller
    if (caller === undefined) return Promise.reject(new TypeError('admin calls need the client option adminToken (or session)'))
    if (typeof caller === 'string') return this.transport.send<T>({ ...call, bearer: caller, signal: options.signal })
    // The session cookie goes with the call; a read needs no proof, a write does (SPEC §10.3).
    const headers: Record<string, string> = call.method === 'GET' ? {} : { 'x-csrf-token': caller.csrf }
    return this.transport.send<T>({ ...call, headers, credentials: 'same-origin', signal: options.signal })
  }
}
