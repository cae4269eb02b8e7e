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
 * Of the calls of SPEC §10 (operators, the console's needs): the reads, `revokeOperator` and
 * `admin.revokeToken` (idempotent) are retried; `createOperator`, `invalidateUser` (a second
 * increment) and `redeliver` (a second delivery) are not. With the option `csrf` instead of
 * `adminToken` (a page of the console), the admin calls send no Authorization: the session
 * cookie authenticates them, and each write carries `x-csrf-token`.
 *
 * A redirect is never followed (REDIRECT_REFUSED) and an answer never read past
 * `maxResponseBytes` (RESPONSE_TOO_LARGE): see response.ts. Neither is retried.
 *
 * `oauth.introspect` and `oauth.revoke` call the OAuth endpoints (RFC 7662, RFC 7009) with
 * the API key as client credentials; both are retried (a read; a revocation is idempotent).
 * Their errors carry RFC 6749's code (`invalid_client`, `unauthorized_client`, …) as `code`.
 */
import { isVerified } from './answers.js'
import { describe, invalidArgument } from './input.js'
import { checkCredentials, type ClientOptions } from './options.js'
import { Transport } from './transport.js'
import { AdminClient } from './admin.js'
import { ConsoleCalls } from './console-calls.js'
import type { CallOptions } from './calls.js'
import type { Introspection, IssuedToken, TokenRevoked, TokensInvalidated, Verified } from './types.js'

export { ChatAuthError, CLIENT_CODES } from './errors.js'
export type * from './types.js'
export type { ClientOptions, TransportOptions } from './options.js'
export type { CallOptions } from './calls.js'
export { AdminClient } from './admin.js'
export { ConsoleCalls } from './console-calls.js'

export class ChatAuthClient {
  /** The admin API (needs `adminToken`, or a console session's `csrf`). */
  readonly admin: AdminClient
  /** The console's session (SPEC §10.3): sign in with a token, read it, sign out. */
  readonly console: ConsoleCalls
  /** The OAuth endpoints, for code that speaks RFC 7662 and RFC 7009 (needs `apiKey`). */
  readonly oauth: OAuthCalls
  private readonly transport: Transport
  private readonly apiKey: ClientOptions['apiKey']

  /** Throws a TypeError naming the option, should one be wrong (see ChatAuthError). */
  constructor(options: ClientOptions) {
    this.transport = new Transport(options)
    checkCredentials(options)
    this.apiKey = options.apiKey
    this.admin = new AdminClient(this.transport, options.adminToken, options.csrf)
    this.console = new ConsoleCalls(this.transport, options.csrf)
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
