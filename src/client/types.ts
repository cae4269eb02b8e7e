/** The gateway's answers, as the API reference (docs/api.md) writes them. Times are ISO-8601 strings. */

export interface UserIdentity {
  id: string
  externalId: string
  companyId: string
  agentId: string
}

export interface AgentSummary {
  id: string
  name: string
  active: boolean
}

export interface IssuedToken {
  token: string
  user: UserIdentity
  agent: AgentSummary
  expiresAt: string
}

export interface TokensInvalidated {
  message: string
  customerUserId: string
  newTokenVersion: number
}

export interface TokenRevoked {
  message: string
  jti: string
  expiresAt: string
}

export interface Verified {
  user: UserIdentity
  agent: AgentSummary
  tokenVersion: number
  expiresAt: string
}

/**
 * `POST /oauth2/introspect` (RFC 7662): every field for a token active to the asking key;
 * `{active: false}` and nothing more for anything else.
 */
export type Introspection =
  | {
      active: true
      /** the customer user id */
      sub: string
      exp: number
      iat?: number
      jti?: string
      token_type: 'Bearer'
      /** the keyId that asked */
      client_id: string
      iss?: string
      aud?: string | string[]
      company_id: string
      agent_id: string
      token_version: number
      /** the customer user's externalId */
      ext_id: string
    }
  | { active: false }

export interface Company {
  id: string
  name: string
  defaultAgentId: string | null
  createdAt: string
}

export interface Agent {
  id: string
  companyId: string
  name: string
  active: boolean
  createdAt: string
}

export interface CreatedApiKey {
  keyId: string
  /** shown this once; only its hash is kept */
  keySecret: string
  companyId: string
  name: string | null
  createdAt: string
}

export interface ApiKey {
  keyId: string
  name: string | null
  createdAt: string
  revokedAt: string | null
  lastUsedAt: string | null
}

export interface RevokedApiKey {
  keyId: string
  revokedAt: string
  receipt: Receipt
}

/**
 * Where a change arrived (SPEC §10.2), as the node that made it saw it: every node registered
 * when it went out, how long after the commit each acknowledged (null: it did not, and
 * refuses the change's tokens once its lease lapsed), and the open sessions each ended.
 */
export interface Receipt {
  changeId: string
  outcome: 'acknowledged' | 'lease_expired' | 'embedded'
  nodes: Array<{ nodeId: string; ackedAfterMs: number | null; sessionsEnded: number | null }>
}

/** An agent or a user as a change left it, with where the change arrived. */
export type Receipted<T> = T & { receipt: Receipt }

export type Role = 'viewer' | 'operator' | 'admin'

/** A named operator of the admin API (SPEC §10.1), as listed: never its token. */
export interface Operator {
  id: string
  name: string
  role: Role
  createdAt: string
  revokedAt: string | null
  lastUsedAt: string | null
}

/** The answer of createOperator: the only time the token (`opt_…`) is shown. */
export interface CreatedOperator {
  id: string
  name: string
  role: Role
  token: string
  createdAt: string
}

export interface RevokedOperator {
  id: string
  revokedAt: string
}

export interface UserInvalidated {
  customerUserId: string
  newTokenVersion: number
  receipt: Receipt
}

/** The admin API's revoke-token; `receipt` null: the token was already revoked, or has expired. */
export interface TokenRevokedByAdmin {
  message: string
  jti: string
  expiresAt: string
  receipt: Receipt | null
}

export interface CompanyPage {
  companies: Company[]
  /** pass as `after` for the next page; null at the end */
  next: string | null
}

/** What a company's or agent's revocation would end (SPEC §10.2). */
export interface RevocationPreview {
  users: number
  openSessions: number
}

export interface Redelivery {
  deliveryId: string
  webhookId: string
  eventId: string
  status: 'pending'
}

/** One live node (SPEC §10.2). */
export interface NodeStatus {
  nodeId: string
  version: string | null
  startedAt: string | null
  ready: boolean
  trusted: boolean
  untrustedSince: string | null
  lastChangeAt: string | null
  changeLogReadAt: string | null
  behind: { changes: number; ms: number }
  cache: { users: number; bytes: number }
  sessions: number
  eventStreams: number
  clockOffsetMs: number | null
  redis: { follows: string | null; subscribed: boolean } | null
}

/** A console session (SPEC §10.3): who signed in, and the anti-CSRF token its writes carry. */
export interface ConsoleSession {
  role: Role
  name: string
  csrf: string
}

export interface CustomerUser {
  id: string
  externalId: string
  companyId: string
  agentId: string
  tokenVersion: number
  active: boolean
  createdAt: string
}

export interface CompanyTokensRevoked {
  companyId: string
  revokedAt: string
  receipt: Receipt
}

export interface AgentTokensRevoked {
  agentId: string
  revokedAt: string
  receipt: Receipt
}

export type EventType =
  | 'tokens.invalidated'
  | 'token.revoked'
  | 'company.tokens_revoked'
  | 'agent.tokens_revoked'
  | 'user.activated'
  | 'user.deactivated'
  | 'agent.activated'
  | 'agent.deactivated'
  | 'api_key.created'
  | 'api_key.revoked'

export interface AuditEvent {
  id: string
  type: EventType
  at: string
  actor: { kind: 'apiKey'; keyId: string } | { kind: 'admin' } | { kind: 'operator'; id: string; name: string }
  /** the user, agent, company, key or token (`jti`) the event is about */
  subject: { kind: 'user' | 'agent' | 'company' | 'apiKey' | 'token'; id?: string; externalId?: string; keyId?: string; jti?: string }
  /** what else the change says, e.g. `newTokenVersion`; never a secret */
  detail: { newTokenVersion?: number; [field: string]: unknown }
}

export interface EventPage {
  events: AuditEvent[]
  /** pass as `before` for the next (older) page; null at the end */
  next: string | null
  /** pass as `after` to get what commits later, oldest first */
  cursor: string
}

/** A webhook endpoint as listed (SPEC §9.3): never its secret. */
export interface Webhook {
  id: string
  companyId: string
  url: string
  /** the event types sent; null: every type */
  types: EventType[] | null
  createdAt: string
}

/** The answer of createWebhook: the only time the secret (`whsec_…`) is shown. */
export interface CreatedWebhook extends Webhook {
  secret: string
}

/** One event's delivery to an endpoint, as its last attempt left it. */
export interface WebhookDelivery {
  /** redeliver it with `admin.redeliver(deliveryId)` */
  deliveryId: string
  eventId: string
  eventType: EventType
  /** pending: not tried yet; retrying: the last attempt failed, another is due; failed: given up after 24 h */
  status: 'pending' | 'delivered' | 'retrying' | 'failed'
  /** attempts made */
  attempt: number
  /** when the last attempt was made */
  at: string | null
  /** the last attempt's HTTP status; null when none came (timeout, refused connection) */
  responseStatus: number | null
  error: string | null
  nextAttemptAt: string | null
}
