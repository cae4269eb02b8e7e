import type { InvalidationBus, Receipt } from './bus/bus.js'
import { ADMIN, agentState, apiKeyRevision, companyState, userState, type Actor, type Change } from './domain.js'
import type { AgentRecord, ApiKeyRecord, CompanyTokensRevoked, PublishingWrite, Store, TokenRevocation, UserRecord } from './store/store.js'
import type { RevocationLimits } from './store/token-revocations.js'

/**
 * The only way to change what verification sees: each method commits the row (with its
 * change_log row and audit event, in one statement), publishes the change on the bus, and
 * only then resolves with the committed record and the publish's receipt (where the change
 * arrived: SPEC §10.2). When the bus cannot confirm the publish it rejects (the write
 * answers 503); the change is committed all the same, and every node reads it from the
 * change log at its next catch-up.
 * undefined: no row matched, nothing was written.
 *
 * A route cannot forget the publish: the store's publishing writes are not handed to it.
 */
/** A committed change: its record, and where it arrived. */
export interface Committed<R> {
  record: R
  receipt: Receipt
}

export interface Changes {
  /** SPEC §3.2: every token of the user is refused once this resolves. */
  invalidateTokens(companyId: string, userId: string, actor?: Actor): Promise<Committed<UserRecord> | undefined>
  setUserActive(userId: string, active: boolean, actor?: Actor): Promise<Committed<UserRecord> | undefined>
  /** Ties an active user to another agent; undefined when the user is inactive or gone. */
  setUserAgent(userId: string, agentId: string): Promise<Committed<UserRecord> | undefined>
  updateAgent(agentId: string, patch: { name?: string; active?: boolean }, actor?: Actor): Promise<Committed<AgentRecord> | undefined>
  /** Idempotent: a second revocation keeps the first revocation time (and is announced again). */
  revokeApiKey(keyId: string, actor?: Actor): Promise<Committed<ApiKeyRecord> | undefined>
  /** SPEC §7.1: every token of the company signed before this resolves is refused; later ones are not. */
  revokeCompanyTokens(companyId: string, actor?: Actor): Promise<Committed<CompanyTokensRevoked> | undefined>
  /** SPEC §7.1: the same for one agent. */
  revokeAgentTokens(agentId: string, actor?: Actor): Promise<Committed<AgentRecord> | undefined>
  /**
   * SPEC §7.1: the one token with this jti (of user `userId`) is refused until its exp; a
   * repeat is announced again. 'limit-reached': the company already holds `maxLive` live
   * revocations and this one would be new; 'expired': by the store's clock the token expired
   * more than `graceSeconds` ago. Either way nothing was written nor published.
   */
  revokeToken(companyId: string, jti: string, exp: number, userId: string, limits: RevocationLimits, actor?: Actor): Promise<Committed<TokenRevocation> | 'limit-reached' | 'expired' | undefined>
}

export function createChanges({ store, bus }: { store: Pick<Store, PublishingWrite>; bus: InvalidationBus }): Changes {
  async function commit<R>(write: Promise<R | undefined>, change: (record: R) => Change): Promise<Committed<R> | undefined> {
    const record = await write
    if (record === undefined) return undefined
    const receipt = await bus.publish(change(record))
    return { record, receipt }
  }

  // Only the state fields travel: a record also carries timestamps.
  const user = (record: UserRecord): Change => ({ kind: 'user', state: userState(record) })
  const agent = (record: AgentRecord): Change => ({ kind: 'agent', state: agentState(record) })
  // API keys travel without their secret hash: a revoked key is evicted and re-read.
  const revokedKey = (record: ApiKeyRecord): Change => ({ kind: 'apiKey', keyId: record.keyId, revision: apiKeyRevision(record.revokedAt !== null) })

  return {
    invalidateTokens: (companyId, userId, actor = ADMIN) => commit(store.incrementTokenVersion(companyId, userId, actor), user),
    setUserActive: (userId, active, actor = ADMIN) => commit(store.setUserActive(userId, active, actor), user),
    setUserAgent: (userId, agentId) => commit(store.setUserAgent(userId, agentId), user),
    updateAgent: (agentId, patch, actor = ADMIN) => commit(store.updateAgent(agentId, patch, actor), agent),
    revokeApiKey: (keyId, actor = ADMIN) => commit(store.revokeApiKey(keyId, actor), revokedKey),
    revokeCompanyTokens: (companyId, actor = ADMIN) => commit(store.revokeCompanyTokens(companyId, actor), (record) => ({ kind: 'company', state: companyState(record) })),
    revokeAgentTokens: (agentId, actor = ADMIN) => commit(store.revokeAgentTokens(agentId, actor), agent),
    revokeToken: async (companyId, jti, exp, userId, limits, actor = ADMIN) => {
      const revoked = await store.revokeToken(companyId, jti, exp, userId, limits, actor)
      // A refusal changed nothing: there is nothing to publish.
      if (revoked === 'limit-reached' || revoked === 'expired') return revoked
      return commit(Promise.resolve(revoked), (record) => ({ kind: 'token', jti: record.jti, exp: record.exp }))
    },
  }
}
