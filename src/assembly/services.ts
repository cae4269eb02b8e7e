import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { InvalidationBus } from '../bus/bus.js'
import type { States } from '../cache/states.js'
import type { Keyring } from '../jwt/keyring.js'
import type { Store } from '../store/store.js'
import { createBatcher } from '../store/batcher.js'
import { createTokenVerifier, type VerifyToken } from '../auth/verify.js'
import { createApiKeyAuthentication, type AuthenticateApiKey } from '../auth/credentials.js'
import { createTokenIssuer, type NewUserOutcome, type TokenIssuer } from '../auth/issue-token.js'
import { createTokenRevoker, type TokenRevoker } from '../auth/revoke-token.js'
import { createChanges, type Changes } from '../changes.js'
import { revocationGraceSeconds } from '../clock/grace.js'
import { throttledLog } from '../throttled-log.js'
import type { OnClose } from './lifecycle.js'

const LAST_USED_FLUSH_MS = 5000

export interface Services {
  verifyToken: VerifyToken
  /** the API key behind a (key id, secret) pair, or the SPEC's 401 */
  authenticateApiKey: AuthenticateApiKey
  /** the steps of issuing a token (SPEC §3.1) */
  tokens: TokenIssuer
  /** every write that changes what verification sees: commit, then publish to every node */
  changes: Changes
  /** SPEC §7.1 revoke-token: one token, by its jti */
  revoker: TokenRevoker
}

/** What the routes and the in-process plugin use, made of the store, caches, bus and keys. */
export function openServices(onClose: OnClose, config: Config, parts: { store: Store; states: States; bus: InvalidationBus; keyring: Keyring; metrics: Metrics; logger: Logger }): Services {
  const { store, states, bus, keyring, metrics, logger } = parts
  const clockToleranceSeconds = config.jwt.clockToleranceSeconds
  const outcomeSeries = metrics.seriesCounter('chat_auth_verifications_total', 'Token verifications by outcome code', ['code'])
  // One increment per outcome, bound once: the hot path allocates nothing and hashes no labels.
  const outcomes = new Map<string, () => void>()
  const verifyToken = createTokenVerifier({
    keyring,
    states,
    clockToleranceSeconds,
    onOutcome: (code) => {
      let count = outcomes.get(code)
      if (count === undefined) outcomes.set(code, (count = outcomeSeries({ code })))
      count()
    },
  })
  const usedKeys = createBatcher({
    write: (keyIds) => store.markApiKeysUsed(keyIds),
    onError: (error) => logger.warn({ err: error }, 'could not record API key use'),
    schedule: (flush) => setTimeout(flush, LAST_USED_FLUSH_MS).unref(),
  })
  onClose(() => usedKeys.drain())
  const changes = createChanges({ store, bus })
  const authenticateApiKey = createApiKeyAuthentication({
    findKey: states.apiKey,
    // the very query a cache miss makes (the batched one), so that both refusals cost the same
    readKey: async (keyId) => (await store.getApiKeyStates([keyId]))[0],
    noteUsed: (keyId) => usedKeys.add(keyId),
  })
  const revoker = createTokenRevoker({ keyring, changes, graceSeconds: revocationGraceSeconds(config), maxLiveRevocations: config.maxLiveTokenRevocations })
  const tokens = createTokenIssuer({
    states,
    store,
    changes,
    keyring,
    jwt: config.jwt,
    maxLifetimeSeconds: config.tokenMaxTtlSeconds,
    newUsers: config.newUsers,
    onNewUser: newUserReport(metrics, logger),
  })
  return { verifyToken, authenticateApiKey, tokens, changes, revoker }
}

const NEW_USER_SERIES: Record<NewUserOutcome, string> = { created: 'created', 'rate-limit': 'rate_limited', 'user-limit': 'user_limit' }

/**
 * SPEC §7.3, what an operator sees of a company near its limits: every new user and refusal
 * counted (no company label: its values would be unbounded), and a refusal logged at warn
 * with the company's id, once per 5 s per company. The admin's usage read says how near.
 */
function newUserReport(metrics: Metrics, logger: Logger): (outcome: NewUserOutcome, companyId: string) => void {
  const count = metrics.counter('chat_auth_new_users_total', 'Tokens for a userId the company never used, by outcome: created, rate_limited (429), user_limit (409)', ['outcome'])
  const warn = throttledLog(logger, Date.now)
  return (outcome, companyId) => {
    count({ outcome: NEW_USER_SERIES[outcome] })
    if (outcome === 'rate-limit') {
      warn('a company was refused new users: past NEW_USERS_BURST and NEW_USERS_PER_MINUTE (again within 5 s: not logged, counted in chat_auth_new_users_total)', { companyId, code: 'NEW_USER_RATE_LIMITED' }, `rate ${companyId}`)
    } else if (outcome === 'user-limit') {
      warn('a company was refused new users: at MAX_USERS_PER_COMPANY (again within 5 s: not logged, counted in chat_auth_new_users_total)', { companyId, code: 'USER_LIMIT' }, `total ${companyId}`)
    }
  }
}
