import { LRUCache } from 'lru-cache'
import type { Change, InvalidationBus, RowChanged } from '../bus/bus.js'
import { apiKeyRevision, type AgentState, type ApiKeyState, type UserState } from '../domain.js'
import type { Store } from '../store/store.js'
import { CoherentCache, type Revisioned } from './coherent-cache.js'

/**
 * The node's view of users, agents and API keys: served from coherent LRUs while the bus
 * vouches for them, read from the store otherwise. A hit does no I/O at all.
 */
export interface States {
  /** The cached state itself on a hit (no promise, no I/O); a promise of a store read otherwise. */
  user(id: string): MaybePromise<UserState | undefined>
  agent(id: string): MaybePromise<AgentState | undefined>
  apiKey(keyId: string): MaybePromise<ApiKeyState | undefined>
  /** (company, external id) → user id never changes once made, so it needs no coherence. */
  knownUserId(companyId: string, externalId: string): string | undefined
  rememberUserId(companyId: string, externalId: string, userId: string): void
  readonly caches: { users: CoherentCache<UserState>; agents: CoherentCache<AgentState>; apiKeys: CoherentCache<ApiKeyRevision> }
}

type ApiKeyRevision = ApiKeyState & Revisioned
export type MaybePromise<T> = T | Promise<T>

export function createStates(store: Pick<Store, 'getUser' | 'getAgent' | 'getApiKeyState'>, bus: InvalidationBus, cacheSize: number): States {
  const users = new CoherentCache<UserState>(cacheSize)
  const agents = new CoherentCache<AgentState>(Math.max(100, Math.ceil(cacheSize / 10)))
  const apiKeys = new CoherentCache<ApiKeyRevision>(Math.max(100, Math.ceil(cacheSize / 100)))
  const userIds = new LRUCache<string, string>({ max: cacheSize })
  const intern = createInterner(100_000)

  const cacheOf = { user: users, agent: agents, apiKey: apiKeys } as const
  bus.onChange((change: Change | RowChanged) => {
    // Another node's change names a row and a revision, never a state: evict, read again.
    if ('id' in change) return cacheOf[change.kind].apply(change.id, change.revision)
    switch (change.kind) {
      case 'user':
        users.apply(change.state.id, change.state.revision, compactUser(change.state, change.state.id, intern))
        break
      case 'agent':
        agents.apply(change.state.id, change.state.revision, compactAgent(change.state, intern))
        break
      case 'apiKey':
        apiKeys.apply(change.keyId, change.revision)
        break
    }
  })
  bus.onEpochChange(() => {
    users.flush()
    agents.flush()
    apiKeys.flush()
  })

  function read<V extends Revisioned>(cache: CoherentCache<V>, key: string, load: () => Promise<V | undefined>): MaybePromise<V | undefined> {
    if (bus.trusted()) {
      const hit = cache.get(key)
      if (hit !== undefined) return hit
    }
    return fill(cache, key, load)
  }

  async function fill<V extends Revisioned>(cache: CoherentCache<V>, key: string, load: () => Promise<V | undefined>): Promise<V | undefined> {
    // The read starts after the request did, so its answer is current for this request
    // whatever happens to the cache; the ticket decides only whether it may be kept.
    const ticket = cache.ticket()
    const value = await load()
    if (value !== undefined) cache.fill(key, value, ticket)
    return value
  }

  return {
    caches: { users, agents, apiKeys },
    user: (id) => read(users, id, async () => compactUser(await store.getUser(id), id, intern)),
    agent: (id) => read(agents, id, async () => compactAgent(await store.getAgent(id), intern)),
    apiKey: (keyId) =>
      read(apiKeys, keyId, async () => {
        const key = await store.getApiKeyState(keyId)
        return key && { ...key, companyId: intern(key.companyId), revision: apiKeyRevision(key.revoked) }
      }),
    knownUserId: (companyId, externalId) => userIds.get(companyId + '\u0000' + externalId),
    rememberUserId: (companyId, externalId, userId) => {
      userIds.set(companyId + '\u0000' + externalId, userId)
    },
  }
}

// Only the fields verification needs, with company and agent ids shared between the
// many users that carry them: it keeps a million cached users small.
// The id is the cache key's own string: one copy per cached user, not two.
function compactUser<T extends UserState | undefined>(user: T, id: string, intern: (s: string) => string): T {
  if (user === undefined) return user
  return {
    id,
    companyId: intern(user.companyId),
    externalId: user.externalId,
    agentId: intern(user.agentId),
    tokenVersion: user.tokenVersion,
    active: user.active,
    revision: user.revision,
  } as UserState as T
}

function compactAgent<T extends AgentState | undefined>(agent: T, intern: (s: string) => string): T {
  if (agent === undefined) return agent
  return { id: agent.id, companyId: intern(agent.companyId), name: agent.name, active: agent.active, revision: agent.revision } as AgentState as T
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
