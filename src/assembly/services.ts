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
import { createTokenIssuer, type TokenIssuer } from '../auth/issue-token.js'
import { createTokenRevoker, type TokenRevoker } from '../auth/revoke-token.js'
import { createChanges, type Changes } from '../changes.js'
import { revocationGraceSeconds } from '../clock/grace.js'
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
  const tokens = createTokenIssuer({ states, store, changes, keyring, jwt: config.jwt, maxLifetimeSeconds: config.tokenMaxTtlSeconds })
  return { verifyToken, authenticateApiKey, tokens, changes, revoker }
}
