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
}

export interface AgentTokensRevoked {
  agentId: string
  revokedAt: string
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
  actor: { kind: 'apiKey'; keyId: string } | { kind: 'admin' }
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
