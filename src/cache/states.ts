import { LRUCache } from 'lru-cache'
import type { InvalidationBus } from '../bus/bus.js'
import { apiKeyRevision, isUuid, type AgentState, type AppliedChange, type ApiKeyState, type CompanyState, type UserState } from '../domain.js'
import type { Store } from '../store/store.js'
import { CoherentCache, type Revisioned } from './coherent-cache.js'
import { createMissBatcher, type MissBatcher } from './miss-batcher.js'
import { createRevokedTokens, type RevokedTokens, type RevokedTokensOptions } from './revoked-tokens.js'
import { agentBytes, apiKeyBytes, companyBytes, userBytes, userIdBytes } from './sizes.js'
import type { MaybePromise } from '../maybe-promise.js'

/**
 * The node's view of users, agents, companies and API keys: served from coherent LRUs while
 * the bus vouches for them, read from the store otherwise, and of the tokens revoked one by
 * one (revoked-tokens.ts). A hit does no I/O at all.
 */
export interface States {
  /**
   * The cached state itself on a hit (no promise, no I/O); a promise of a store read otherwise.
   * Without the id: it is the one asked for.
   */
  user(id: string): MaybePromise<CachedUser | undefined>
  agent(id: string): MaybePromise<AgentState | undefined>
  apiKey(keyId: string): MaybePromise<ApiKeyState | undefined>
  /** The company's tokens generation (SPEC §7.1). */
  company(id: string): MaybePromise<CompanyState | undefined>
  /** Whether the token with this jti was revoked on its own (SPEC §7.1). */
  tokenRevoked(jti: string): MaybePromise<boolean>
  /** (company, external id) → user id never changes once made, so it needs no coherence. */
  knownUserId(companyId: string, externalId: string): string | undefined
  rememberUserId(companyId: string, externalId: string, userId: string): void
  readonly caches: { users: CoherentCache<CachedUser>; agents: CoherentCache<AgentState>; apiKeys: CoherentCache<ApiKeyRevision>; companies: CoherentCache<CompanyState> }
  /** Estimated bytes each cache holds, the (company, external id) index among them (sizes.ts). */
  bytes(): Record<'users' | 'agents' | 'apiKeys' | 'companies' | 'userIds', number>
  readonly revokedTokens: RevokedTokens
  /** A committed change (change-pipeline.ts, its first step): the written state installed, or the row evicted. */
  apply(change: AppliedChange): void
  /** A new epoch: every cache emptied, the revoked tokens loaded again. */
  flush(): void
  /** Stops the revoked-token loads. */
  close(): void
}

export interface StatesOptions {
  /**
   * Estimated bytes of cached users (CACHE_MAX_BYTES); the (company, external id) index gets
   * as much, agents and companies a tenth each, API keys a hundredth. None: bounded by count only.
   */
  maxBytes?: number
  /** REVOCATION_FILTER_BYTES (revocation-filter.ts) */
  revocationFilterBytes?: number
  /** the revoked-token filter's tuning and hooks (tests, chaos mutants, logging) */
  revokedTokens?: Partial<Pick<RevokedTokensOptions, 'pageSize' | 'rebuildAfterAdds' | 'retryAfterMs' | 'createFilter' | 'onLoad' | 'onLoadError'>>
}

const DEFAULT_FILTER_BYTES = 16 * 1024 * 1024

type StateReads = Pick<Store, 'getUsers' | 'getAgents' | 'getApiKeyStates' | 'getCompanyStates' | 'revokedJtis' | 'revokedAmong'>

const MIN_SHARE_BYTES = 65_536

type ApiKeyRevision = ApiKeyState & Revisioned
export function createStates(store: StateReads, bus: Pick<InvalidationBus, 'trusted'>, cacheSize: number, options: StatesOptions = {}): States {
  const maxBytes = options.maxBytes
  // a small budget still leaves the few agents, companies and keys room for a few hundred entries
  const budget = <V>(share: number, bytesOf: (key: string, value: V) => number) =>
    maxBytes === undefined ? undefined : { maxBytes: Math.max(MIN_SHARE_BYTES, Math.ceil(maxBytes * share)), bytesOf }
  const users = new CoherentCache<CachedUser>(cacheSize, undefined, budget(1, userBytes))
  const agents = new CoherentCache<AgentState>(Math.max(100, Math.ceil(cacheSize / 10)), undefined, budget(1 / 10, agentBytes))
  const companies = new CoherentCache<CompanyState>(Math.max(100, Math.ceil(cacheSize / 10)), undefined, budget(1 / 10, companyBytes))
  const revokedTokens = createRevokedTokens({
    ...options.revokedTokens,
    loadPage: (after, limit) => store.revokedJtis(after, limit),
    read: async (jti) => (await store.revokedAmong([jti])).length > 0,
    trusted: () => bus.trusted(),
    filterBytes: options.revocationFilterBytes ?? DEFAULT_FILTER_BYTES,
  })
  const apiKeys = new CoherentCache<ApiKeyRevision>(Math.max(100, Math.ceil(cacheSize / 100)), undefined, budget(1 / 100, apiKeyBytes))
  // External ids are up to 255 characters: this index is bounded in bytes like the users.
  // With a byte bound its arrays grow as it fills (max 0) instead of taking CACHE_SIZE slots
  // at start, before a single token is issued; the count bound is then kept by hand.
  const userIds = new LRUCache<string, string>(maxBytes === undefined ? { max: cacheSize } : { max: 0, maxSize: maxBytes, sizeCalculation: (userId, key) => userIdBytes(key, userId) })
  const intern = createInterner(100_000)
  const profile = createProfiles(PROFILES_KEPT, intern)

  const cacheOf = { user: users, agent: agents, apiKey: apiKeys, company: companies } as const
  /** A change, in the one shape every node applies (change-pipeline.ts: the first of its steps). */
  function apply(change: AppliedChange): void {
    const { written } = change
    // A revoked jti is the one change that adds: it can only make the node refuse more.
    if (change.kind === 'token') return revokedTokens.add({ jti: change.id, exp: change.revision })
    // Another node's change names a row and a revision, never a state: evict, read again.
    if (written === undefined) return cacheOf[change.kind].apply(change.id, change.revision)
    switch (written.kind) {
      case 'user':
        return users.apply(written.state.id, written.state.revision, compactUser(written.state, profile))
      case 'agent':
        return agents.apply(written.state.id, written.state.revision, compactAgent(written.state, intern))
      case 'company':
        return companies.apply(written.state.id, written.state.revision, { ...written.state })
      default:
        // an API key travels without its state: evicted and read again, as another node's
        return cacheOf[change.kind].apply(change.id, change.revision)
    }
  }

  /** Changes may have been missed: everything is read again. */
  function flush(): void {
    users.flush()
    agents.flush()
    apiKeys.flush()
    companies.flush()
    revokedTokens.reload()
  }

  // Misses are read in batches, one query per tick and cache (miss-batcher.ts). The read
  // starts after the request did, so its answer is current for this request whatever
  // happens to the cache; its ticket decides only whether it may be kept.
  // Values are keyed by the string each was asked for: a cached user's id is its LRU key's own string.
  const uuidRows = async <R extends { id: string }, V>(ids: string[], read: (ids: string[]) => Promise<R[]>, compact: (row: R, id: string) => V) => {
    const asked = new Map(ids.filter(isUuid).map((id) => [id.toLowerCase(), id]))
    const found = new Map<string, V>()
    if (asked.size === 0) return found
    for (const row of await read([...asked.keys()])) {
      const id = asked.get(row.id)
      if (id !== undefined) found.set(id, compact(row, id))
    }
    return found
  }
  const userMisses = createMissBatcher(users, (ids) => uuidRows(ids, store.getUsers, (user) => compactUser(user, profile)))
  const agentMisses = createMissBatcher(agents, (ids) => uuidRows(ids, store.getAgents, (agent) => compactAgent(agent, intern)))
  const companyMisses = createMissBatcher(companies, (ids) => uuidRows(ids, store.getCompanyStates, (company) => ({ ...company })))
  const apiKeyMisses = createMissBatcher(apiKeys, async (keyIds) => {
    const found = new Map<string, ApiKeyRevision>()
    for (const key of await store.getApiKeyStates(keyIds)) found.set(key.keyId, { ...key, companyId: intern(key.companyId), revision: apiKeyRevision(key.revoked) })
    return found
  })

  function read<V extends Revisioned>(cache: CoherentCache<V>, key: string, misses: MissBatcher<V>): MaybePromise<V | undefined> {
    if (bus.trusted()) {
      const hit = cache.get(key)
      if (hit !== undefined) return hit
    }
    return misses.load(key)
  }

  return {
    apply,
    flush,
    caches: { users, agents, apiKeys, companies },
    bytes: () => ({ users: users.bytes, agents: agents.bytes, apiKeys: apiKeys.bytes, companies: companies.bytes, userIds: userIds.calculatedSize ?? 0 }),
    revokedTokens,
    close: () => revokedTokens.close(),
    company: (id) => read(companies, id, companyMisses),
    tokenRevoked: (jti) => revokedTokens.isRevoked(jti),
    user: (id) => read(users, id, userMisses),
    agent: (id) => read(agents, id, agentMisses),
    apiKey: (keyId) => read(apiKeys, keyId, apiKeyMisses),
    knownUserId: (companyId, externalId) => userIds.get(companyId + '\u0000' + externalId),
    rememberUserId: (companyId, externalId, userId) => {
      const key = companyId + '\u0000' + externalId
      if (userIds.size >= cacheSize && !userIds.has(key)) userIds.pop() // CACHE_SIZE entries at most
      userIds.set(key, userId)
    },
  }
}

/**
 * A cached user: what verification needs of it, without its id (the cache key, which every
 * reader asked with). A million of them are cached, so each holds two references only:
 * its own external id, and a profile shared with every user of the same company, agent,
 * token version, active flag and revision. Revisions and token versions count the changes
 * of one row, so most users share one of a few profiles.
 */
class CompactUser implements CachedUser {
  constructor(
    private readonly profile: UserProfile,
    readonly externalId: string,
  ) {}

  get companyId(): string {
    return this.profile.companyId
  }
  get agentId(): string {
    return this.profile.agentId
  }
  get tokenVersion(): number {
    return this.profile.tokenVersion
  }
  get active(): boolean {
    return this.profile.active
  }
  get revision(): number {
    return this.profile.revision
  }
}

/** A cached user's state but its external id: shared, so never changed once made. */
type UserProfile = Readonly<Omit<CachedUser, 'externalId'>>

/** What a node caches of a user: its state without the id it is cached under. */
export type CachedUser = Omit<UserState, 'id'>

/** Profiles are kept for sharing up to this many, then forgotten all at once (cached users keep theirs). */
const PROFILES_KEPT = 10_000

function compactUser(user: UserState, profile: (user: UserState) => UserProfile): CachedUser {
  return new CompactUser(profile(user), user.externalId)
}

function createProfiles(limit: number, intern: (s: string) => string): (user: UserState) => UserProfile {
  let profiles = new Map<string, UserProfile>()
  return ({ companyId, agentId, tokenVersion, active, revision }) => {
    const key = `${companyId} ${agentId} ${tokenVersion} ${active} ${revision}`
    const known = profiles.get(key)
    if (known !== undefined) return known
    if (profiles.size >= limit) profiles = new Map()
    const made: UserProfile = { companyId: intern(companyId), agentId: intern(agentId), tokenVersion, active, revision }
    profiles.set(key, made)
    return made
  }
}

function compactAgent<T extends AgentState | undefined>(agent: T, intern: (s: string) => string): T {
  if (agent === undefined) return agent
  return {
    id: agent.id,
    companyId: intern(agent.companyId),
    name: agent.name,
    active: agent.active,
    tokensGeneration: agent.tokensGeneration,
    revision: agent.revision,
  } as AgentState as T
}

function createInterner(limit: number): (value: string) => string {
  let strings = new Map<string, string>()
  return (value) => {
    const known = strings.get(value)
    if (known !== undefined) return known
    if (strings.size >= limit) strings = new Map()
    strings.set(value, value)
    return value
  }
}
