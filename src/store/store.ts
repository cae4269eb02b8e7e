import type { Db } from './db.js'
import { apiKeyStore } from './api-keys.js'
import { changeLogStore } from './change-log.js'
import { companyStore } from './companies.js'
import { eventStore } from './events.js'
import { secretStore } from './secrets.js'
import { tokenRevocationStore } from './token-revocations.js'
import { userStore } from './users.js'
import { webhookStore } from './webhooks.js'
import { operatorStore } from './operators.js'

export type { ApiKeyRecord } from './api-keys.js'
export type { ChangesRead } from './change-log.js'
export type { AgentRecord, CompanyRecord, CompanyTokensRevoked, CompanyUsage } from './companies.js'
export type { CommittedEvent, EventRecord, EventsRead } from './events.js'
export type { TokenRevocation } from './token-revocations.js'
export type { NewUserLimits, UserCreation, UserRecord } from './users.js'
export type { LiveConsoleSession, LiveOperator, OperatorRecord, SessionLifetime } from './operators.js'
export type { AttemptOutcome, DeliveryRecord, DueDelivery, LeasedEndpoint, WebhookRecord } from './webhooks.js'

/**
 * Every SQL statement of the service, over either back end, as one object: one module per
 * aggregate (users; companies and agents; API keys; token revocations; events; the change
 * log; generated secrets; webhooks; operators and their console sessions), each with its own row mappers.
 */
export function createStore(db: Db) {
  return {
    db,
    ping: async (): Promise<void> => {
      await db.query('SELECT 1')
    },
    /** The database's wall clock now, in ms since the epoch (clock_timestamp(): not the transaction's start). */
    clock: async (): Promise<number> => Number((await db.query<{ ms: number | string }>(`SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS ms`))[0]!.ms),
    ...companyStore(db),
    ...userStore(db),
    ...apiKeyStore(db),
    ...tokenRevocationStore(db),
    ...eventStore(db),
    ...changeLogStore(db),
    ...secretStore(db),
    ...webhookStore(db),
    ...operatorStore(db),
  }
}

export type Store = ReturnType<typeof createStore>

/**
 * The writes that change what verification sees. Each records its change in the change log
 * (and its audit event) in its own statement, and must be announced on the bus: only
 * `changes.ts` calls them (see `Changes`); everything else gets a `Store` without them.
 */
export type PublishingWrite =
  | 'updateAgent'
  | 'setUserAgent'
  | 'incrementTokenVersion'
  | 'setUserActive'
  | 'revokeApiKey'
  | 'revokeCompanyTokens'
  | 'revokeAgentTokens'
  | 'revokeToken'
export type StoreReads = Omit<Store, PublishingWrite>
