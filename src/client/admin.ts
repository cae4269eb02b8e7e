import type { Call, Transport } from './transport.js'
import { id, text, type CallOptions } from './calls.js'
import type {
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
  NodeStatus,
  Operator,
  Receipted,
  Redelivery,
  RevocationPreview,
  RevokedApiKey,
  RevokedOperator,
  Role,
  TokenRevokedByAdmin,
  UserInvalidated,
  Webhook,
  WebhookDelivery,
} from './types.js'

/**
 * The admin API (`/admin/v1/…`): `Authorization: Bearer <ADMIN_TOKEN or an operator's
 * token>`, or a console session's cookie with its anti-CSRF token on every write. Every call
 * is async, so that a bad id rejects (INVALID_ARGUMENT) like any other failure instead of
 * throwing.
 */
export class AdminClient {
  constructor(
    private readonly transport: Transport,
    private readonly adminToken: string | undefined,
    private readonly csrf?: string,
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

  /** The company's agents, by name. */
  async listAgents(companyId: string, options: CallOptions = {}): Promise<Agent[]> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}/agents`, idempotent: true }, options)
  }

  /** The company's first agent becomes its default agent. */
  async createAgent(companyId: string, body: { name: string; active?: boolean }, options: CallOptions = {}): Promise<Agent> {
    return this.send({ method: 'POST', path: `/admin/v1/companies/${id(companyId)}/agents`, body, idempotent: false }, options)
  }

  /** Deactivation takes effect on every node before this resolves. */
  async updateAgent(agentId: string, body: { name?: string; active?: boolean }, options: CallOptions = {}): Promise<Receipted<Agent>> {
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
  async updateCustomerUser(customerUserId: string, body: { active: boolean }, options: CallOptions = {}): Promise<Receipted<CustomerUser>> {
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

  /** SPEC §10.2: a user by the id the customer knows it by (404 NOT_FOUND: none). */
  async findCustomerUser(companyId: string, externalId: string, options: CallOptions = {}): Promise<CustomerUser> {
    return this.send({ method: 'GET', path: '/admin/v1/customer-users', query: { companyId: text(companyId, 'companyId'), externalId: text(externalId, 'externalId') }, idempotent: true }, options)
  }

  /** Every token of the user stops working before this resolves. Not retried (a second call would also end tokens issued in between). */
  async invalidateUser(customerUserId: string, options: CallOptions = {}): Promise<UserInvalidated> {
    return this.send({ method: 'POST', path: `/admin/v1/customer-users/${id(customerUserId)}/invalidate`, idempotent: false }, options)
  }

  /**
   * This one token stops working, whatever its company (the admin API's revoke-token).
   * Retried: revoking twice is harmless (the second answers `receipt: null`).
   */
  async revokeToken(token: string, options: CallOptions = {}): Promise<TokenRevokedByAdmin> {
    return this.send({ method: 'POST', path: '/admin/v1/tokens/revoke', body: { token: text(token, 'the token') }, idempotent: true }, options)
  }

  /** Companies whose name contains `query` (any case), by name, a page at a time (`limit` 1–100, default 50). */
  async searchCompanies(page: { query?: string; limit?: number; after?: string } = {}, options: CallOptions = {}): Promise<CompanyPage> {
    return this.send({ method: 'GET', path: '/admin/v1/companies', query: { query: page.query, limit: page.limit, after: page.after }, idempotent: true }, options)
  }

  /** What revoking every token of the company would end. */
  async previewCompanyRevocation(companyId: string, options: CallOptions = {}): Promise<RevocationPreview> {
    return this.send({ method: 'GET', path: `/admin/v1/companies/${id(companyId)}/revoke-tokens/preview`, idempotent: true }, options)
  }

  /** What revoking every token of the agent would end. */
  async previewAgentRevocation(agentId: string, options: CallOptions = {}): Promise<RevocationPreview> {
    return this.send({ method: 'GET', path: `/admin/v1/agents/${id(agentId)}/revoke-tokens/preview`, idempotent: true }, options)
  }

  /** Every live node. */
  async listNodes(options: CallOptions = {}): Promise<{ nodes: NodeStatus[] }> {
    return this.send({ method: 'GET', path: '/admin/v1/nodes', idempotent: true }, options)
  }

  /** That delivery's event queued again for its endpoint, due now. Not retried (each call queues one more). */
  async redeliver(deliveryId: string, options: CallOptions = {}): Promise<Redelivery> {
    return this.send({ method: 'POST', path: `/admin/v1/webhook-deliveries/${id(deliveryId)}/redeliver`, idempotent: false }, options)
  }

  /** A named operator with a role; the answer holds its token, the only time it is shown. Not retried (a second operator). */
  async createOperator(body: { name: string; role: Role }, options: CallOptions = {}): Promise<CreatedOperator> {
    return this.send({ method: 'POST', path: '/admin/v1/operators', body, idempotent: false }, options)
  }

  async listOperators(options: CallOptions = {}): Promise<Operator[]> {
    return this.send({ method: 'GET', path: '/admin/v1/operators', idempotent: true }, options)
  }

  /** Its token and console sessions are refused on every node when this resolves. Idempotent. */
  async revokeOperator(operatorId: string, options: CallOptions = {}): Promise<RevokedOperator> {
    return this.send({ method: 'DELETE', path: `/admin/v1/operators/${id(operatorId)}`, idempotent: true }, options)
  }

  private send<T>(call: Omit<Call, 'bearer' | 'signal'>, options: CallOptions): Promise<T> {
    if (this.adminToken !== undefined) return this.transport.send<T>({ ...call, bearer: this.adminToken, signal: options.signal })
    if (this.csrf === undefined) return Promise.reject(new TypeError('admin calls need the client option adminToken (or a console session\'s csrf)'))
    // A console session: the cookie authenticates; a write proves it comes from the console's page.
    const headers: Record<string, string> = call.method === 'GET' ? {} : { 'x-csrf-token': this.csrf }
    return this.transport.send<T>({ ...call, headers, signal: options.signal })
  }
}
