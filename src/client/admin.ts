import { describe, invalidArgument, pathSegment } from './input.js'
import type { Transport, Call } from './transport.js'
import type {
  AdminTokenRevoked,
  Agent,
  AgentTokensRevoked,
  ApiKey,
  AuditEvent,
  Company,
  CompanyPage,
  CompanyTokensRevoked,
  CreatedApiKey,
  CreatedOperator,
  CreatedWebhook,
  CustomerUser,
  EventPage,
  EventType,
  GatewayNode,
  Operator,
  OperatorRole,
  Receipt,
  Redelivery,
  RevocationPreview,
  RevokedApiKey,
  UserTokensInvalidated,
  Webhook,
  WebhookDelivery,
} from './types.js'

/** Options of one call. */
export interface CallOptions {
  /** aborts the call (and its retries) */
  signal?: AbortSignal
}

/** An id as one path segment; not a string, or not well-formed text, is INVALID_ARGUMENT. */
const id = (value: string) => pathSegment(value, 'an id')

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
  async updateAgent(agentId: string, body: { name?: string; active?: boolean }, options: CallOptions = {}): Promise<Agent & { receipt: Receipt }> {
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
  async updateCustomerUser(customerUserId: string, body: { active: boolean }, options: CallOptions = {}): Promise<CustomerUser & { receipt: Receipt }> {
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

  /** SPEC §10.2: every live node. */
  async listNodes(options: CallOptions = {}): Promise<{ nodes: GatewayNode[] }> {
    return this.send({ method: 'GET', path: '/admin/v1/nodes', idempotent: true }, options)
  }

  /** SPEC §10.2: companies whose name contains `query` (all without it), by name, a page at a time. */
  async searchCompanies(page: { query?: string; limit?: number; after?: string } = {}, options: CallOptions = {}): Promise<CompanyPage> {
    return this.send({ method: 'GET', path: '/admin/v1/companies', query: { query: page.query, limit: page.limit, after: page.after }, idempotent: true }, options)
  }

  /** SPEC §10.2: a user by the id the customer knows (404 NOT_FOUND when none). */
  async findCustomerUser(by: { companyId: string; externalId: string }, options: CallOptions = {}): Promise<CustomerUser> {
    return this.send({ method: 'GET', path: '/admin/v1/customer-users', query: { companyId: by.companyId, externalId: by.externalId }, idempotent: true }, options)
  }

  /** SPEC §10.2: every token of the user stops working, with the receipt. Not retried (as invalidate). */
  async invalidateCustomerUser(customerUserId: string, options: CallOptions = {}): Promise<UserTokensInvalidated> {
    return this.send({ method: 'POST', path: `/admin/v1/customer-users/${id(customerUserId)}/invalidate`, idempotent: false }, options)
  }

  /** SPEC §10.2: one token of any company stops working, with the receipt (null: already expired or revoked). Retried. */
  async revokeTokenAsAdmin(token: string, options: CallOptions = {}): Promise<AdminTokenRevoked> {
    if (typeof token !== 'string') return Promise.reject(invalidArgument(`the token must be a string, not ${describe(token)}`))
    return this.send({ method: 'POST', path: '/admin/v1/tokens/revoke', body: { token }, idempotent: true }, options)
  }

  /** SPEC §10.2: how many users and open sessions revokeCompanyTokens would reach. */
  async previewCompanyRevocation(companyId: string, options: CallOptions = {}): Promise<RevocationPreview> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}/revoke-tokens/preview`, idempotent: true }, options)
  }

  /** SPEC §10.2: how many users and open sessions revokeAgentTokens would reach. */
  async previewAgentRevocation(agentId: string, options: CallOptions = {}): Promise<RevocationPreview> {
    return this.send({ method: 'GET', path: `/admin/v1/agents/${id(agentId)}/revoke-tokens/preview`, idempotent: true }, options)
  }

  /** SPEC §10.2: that event again for that endpoint, due now. Not retried (a second delivery). */
  async redeliverWebhookDelivery(deliveryId: string, options: CallOptions = {}): Promise<Redelivery> {
    return this.send({ method: 'POST', path: `/admin/v1/webhook-deliveries/${id(deliveryId)}/redeliver`, idempotent: false }, options)
  }

  /** SPEC §10.1: the answer holds the operator's token, the only time it is shown. Not retried. */
  async createOperator(body: { name: string; role: OperatorRole }, options: CallOptions = {}): Promise<CreatedOperator> {
    return this.send({ method: 'POST', path: '/admin/v1/operators', body, idempotent: false }, options)
  }

  async listOperators(options: CallOptions = {}): Promise<Operator[]> {
    return this.send({ method: 'GET', path: '/admin/v1/operators', idempotent: true }, options)
  }

  /** SPEC §10.1: refused on every node at once, its console sessions ended. Idempotent: retried. */
  async revokeOperator(operatorId: string, options: CallOptions = {}): Promise<{ id: string; revokedAt: string }> {
    return this.send({ method: 'DELETE', path: `/admin/v1/operators/${id(operatorId)}`, idempotent: true }, options)
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
