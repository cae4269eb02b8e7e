/**
 * The domain: what verification needs of users, agents and API keys, as cached on every
 * node and carried by the bus. No SQL, no HTTP: the store, the caches, the bus, auth and
 * the routes all speak these types.
 */

/** What verification needs of a customer user. */
export interface UserState {
  id: string
  companyId: string
  externalId: string
  agentId: string
  tokenVersion: number
  active: boolean
  /** grows on every change of the row: the order of changes, for caches */
  revision: number
}

/** What verification needs of an agent. */
export interface AgentState {
  id: string
  companyId: string
  name: string
  active: boolean
  /** grows on every revoke-tokens of the agent: a token signed under a lower one is revoked */
  tokensGeneration: number
  revision: number
}

/** What verification needs of a company: the generation of its tokens (SPEC §7.1). */
export interface CompanyState {
  id: string
  /** grows on every revoke-tokens of the company: a token signed under a lower one is revoked */
  tokensGeneration: number
  revision: number
}

/** One token revoked by its jti (SPEC §7.1), kept until the token expires. */
export interface RevokedToken {
  jti: string
  /** the token's own exp, in seconds since the epoch */
  exp: number
}

/**
 * The private claims that carry, in a token, the generations of its company and agent when
 * it was signed (see `CompanyState.tokensGeneration`). A token without them predates
 * them: generation 0.
 */
export const COMPANY_GENERATION_CLAIM = 'cgen'
export const AGENT_GENERATION_CLAIM = 'agen'

/** What authentication needs of an API key. */
export interface ApiKeyState {
  keyId: string
  companyId: string
  secretHash: Buffer
  revoked: boolean
}

/**
 * An API key's "revision" for the caches: a key changes only once, when it is revoked, and
 * a revocation is for good; so a live key is revision 0 and a revoked one revision 1.
 */
export const apiKeyRevision = (revoked: boolean): number => (revoked ? 1 : 0)

/** The state fields alone (a record also carries timestamps): what travels on the bus. */
export const userState = (user: UserState): UserState => ({
  id: user.id,
  companyId: user.companyId,
  externalId: user.externalId,
  agentId: user.agentId,
  tokenVersion: user.tokenVersion,
  active: user.active,
  revision: user.revision,
})

export const agentState = (agent: AgentState): AgentState => ({
  id: agent.id,
  companyId: agent.companyId,
  name: agent.name,
  active: agent.active,
  tokensGeneration: agent.tokensGeneration,
  revision: agent.revision,
})

export const companyState = (company: CompanyState): CompanyState => ({
  id: company.id,
  tokensGeneration: company.tokensGeneration,
  revision: company.revision,
})

/** A committed change, as the node that made it hands it to the bus (and what its own caches apply). */
export type Change =
  | { kind: 'user'; state: UserState }
  | { kind: 'agent'; state: AgentState }
  /** API keys travel without their secret hash: a revoked key is evicted and re-read. */
  | { kind: 'apiKey'; keyId: string; revision: number }
  /** A company's tokens generation grew (SPEC §7.1). */
  | { kind: 'company'; state: CompanyState }
  /**
   * One token revoked by its jti (SPEC §7.1). Travels as the row `jti` at "revision" `exp`:
   * a receiver adds it to its revoked set until then (it can only refuse more, never less).
   */
  | { kind: 'token'; jti: string; exp: number }

/**
 * What another node learns of a change: which row changed, and at which revision. It
 * carries no state, so the store stays the only source of truth: a node evicts what it
 * holds of that row below that revision and reads it again when asked.
 */
export interface RowChanged {
  kind: Change['kind']
  id: string
  revision: number
}

/**
 * A change as a node applies it, whichever node wrote it: the row and its revision and, on the
 * node that wrote it, the committed state itself (installed in the caches rather than evicted).
 * The one shape every part of a node sees (change-pipeline.ts).
 */
export interface AppliedChange extends RowChanged {
  written?: Change
}

/** A change the bus delivers, local (`Change`) or another node's (`RowChanged`), as a node applies it. */
export function appliedChange(change: Change | RowChanged): AppliedChange {
  return 'id' in change ? change : { ...rowChanged(change), written: change }
}

export function rowChanged(change: Change): RowChanged {
  if (change.kind === 'apiKey') return { kind: 'apiKey', id: change.keyId, revision: change.revision }
  if (change.kind === 'token') return { kind: 'token', id: change.jti, revision: change.exp }
  return { kind: change.kind, id: change.state.id, revision: change.state.revision }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const CANONICAL_UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/**
 * SPEC §2: an id that is not a well-formed UUID is "not found", never an error. Ids are
 * compared case-insensitively: one written in upper case names the same row (PostgreSQL's
 * uuid type folds case). Its canonical form — the one issued, answered, announced and used
 * as a cache key — is lower case: see `canonicalUuid`.
 */
export function isUuid(value: string): boolean {
  return value.length === 36 && UUID.test(value)
}

/**
 * The canonical (lower-case) form of an id a caller sent, or undefined when it is not a
 * UUID. Anything that becomes a cache key goes through here: an entry under an upper-case
 * spelling would never be reached by the change messages, which name the canonical id.
 */
export function canonicalUuid(value: string): string | undefined {
  return isUuid(value) ? value.toLowerCase() : undefined
}

/** Only the canonical form: for ids this service wrote itself (token claims), never upper case. */
export function isCanonicalUuid(value: string): boolean {
  return value.length === 36 && CANONICAL_UUID.test(value)
}

/** Who made a change, as the audit trail names it (SPEC §7.2, §10.1): never a secret. */
export type Actor = { kind: 'apiKey'; keyId: string } | { kind: 'admin' } | { kind: 'operator'; id: string; name: string }
export const ADMIN: Actor = { kind: 'admin' }

/** SPEC §10.1: what a caller of the admin API may do, each role all that the one before may. */
export const ROLES = ['viewer', 'operator', 'admin'] as const
export type Role = (typeof ROLES)[number]

export const isRole = (value: unknown): value is Role => (ROLES as readonly unknown[]).includes(value)

/** Whether a caller holding `held` may make a call that needs `needed`. */
export const roleAllows = (held: Role, needed: Role): boolean => ROLES.indexOf(held) >= ROLES.indexOf(needed)

/** Who calls the admin API: ADMIN_TOKEN (role admin), or a named operator with its role. */
export interface Caller {
  role: Role
  actor: Actor
}

export const ADMIN_CALLER: Caller = { role: 'admin', actor: ADMIN }
