import type { Logger } from 'pino'
import type { InvalidationBus } from './bus/bus.js'
import { ADMIN, agentState, apiKeyRevision, companyState, userState, type Actor, type Change } from './domain.js'
import { createBatcher } from './store/batcher.js'
import type { AgentRecord, ApiKeyRecord, CompanyTokensRevoked, Outboxed, Store, TokenRevocation, UserRecord } from './store/store.js'

/**
 * The only way to change what verification sees: each method commits the row (with its
 * change_outbox row, in one statement), publishes the change on the bus, and only then
 * resolves with the committed record. When the bus cannot confirm the publish it rejects
 * (the write answers 503) and the outbox row stays for the relay (see bus/outbox-relay.ts).
 * undefined: no row matched, nothing was written.
 *
 * A route cannot forget the publish: the store's publishing writes are not handed to it.
 */
export interface Changes {
  /** SPEC §3.2: every token of the user is refused once this resolves. */
  invalidateTokens(companyId: string, userId: string, actor?: Actor): Promise<UserRecord | undefined>
  setUserActive(userId: string, active: boolean, actor?: Actor): Promise<UserRecord | undefined>
  /** Ties an active user to another agent; undefined when the user is inactive or gone. */
  setUserAgent(userId: string, agentId: string): Promise<UserRecord | undefined>
  updateAgent(agentId: string, patch: { name?: string; active?: boolean }, actor?: Actor): Promise<AgentRecord | undefined>
  /** Idempotent: a second revocation keeps the first revocation time (and is announced again). */
  revokeApiKey(keyId: string, actor?: Actor): Promise<ApiKeyRecord | undefined>
  /** SPEC §7.1: every token of the company signed before this resolves is refused; later ones are not. */
  revokeCompanyTokens(companyId: string, actor?: Actor): Promise<CompanyTokensRevoked | undefined>
  /** SPEC §7.1: the same for one agent. */
  revokeAgentTokens(agentId: string, actor?: Actor): Promise<AgentRecord | undefined>
  /** SPEC §7.1: the one token with this jti (of user `userId`) is refused until its exp; a repeat is announced again. */
  revokeToken(companyId: string, jti: string, exp: number, userId: string, actor?: Actor): Promise<TokenRevocation | undefined>
}

export interface ChangesService extends Changes {
  /** Deletes the outbox rows of announced changes still queued (on shutdown). */
  drain(): Promise<void>
}

type PublishingStore = Pick<
  Store,
  'incrementTokenVersion' | 'setUserActive' | 'setUserAgent' | 'updateAgent' | 'revokeApiKey' | 'revokeCompanyTokens' | 'revokeAgentTokens' | 'revokeToken' | 'deleteOutbox'
>

export function createChanges({ store, bus, logger }: { store: PublishingStore; bus: InvalidationBus; logger: Logger }): ChangesService {
  // Outbox rows of announced changes, deleted together a moment later, off the response
  // path and best-effort: a row left behind is only republished by the relay.
  const announced = createBatcher({
    write: (ids) => store.deleteOutbox(ids),
    onError: (error, rows) => logger.warn({ err: error, rows }, 'could not delete outbox rows; the relay will republish them'),
    schedule: setImmediate,
  })

  async function commit<R>(write: Promise<Outboxed<R> | undefined>, change: (record: R) => Change): Promise<R | undefined> {
    const written = await write
    if (written === undefined) return undefined
    const { outboxId, ...record } = written
    await bus.publish(change(record as R))
    announced.add(outboxId)
    return record as R
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
    revokeToken: (companyId, jti, exp, userId, actor = ADMIN) =>
      commit(store.revokeToken(companyId, jti, exp, userId, actor), (record) => ({ kind: 'token', jti: record.jti, exp: record.exp })),
    drain: () => announced.drain(),
  }
}
