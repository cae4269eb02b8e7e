import type { Logger } from 'pino'
import type { Store } from './store/store.js'
import { CONSOLE_SESSION_MAX_AGE_SECONDS } from './auth/console-sessions.js'

/** change_log rows older than this are pruned: a node cut off from Redis for longer flushes when it is back. */
export const CHANGE_LOG_RETENTION_MS = 60 * 60 * 1000
const CHANGE_LOG_PRUNE_EVERY_MS = 60 * 1000

/**
 * Rows kept only for a while, forgotten off the request path: revocations of tokens that
 * have expired by every clock within MAX_CLOCK_SKEW (nothing left to refuse), audit events (and webhook deliveries done) past EVENT_RETENTION_DAYS, and the
 * change log past CHANGE_LOG_RETENTION_MS (pruned more often: it grows with every write), and
 * console sessions past their 12 h (SPEC §10.3).
 * Every node runs it; the deletes are idempotent.
 */
export interface Housekeeping {
  /** One round now (tests); how many rows each kind lost. */
  runOnce(): Promise<{ revokedTokens: number; events: number; webhookDeliveries: number; consoleSessions: number }>
  stop(): void
}

export interface HousekeepingOptions {
  store: Pick<Store, 'pruneRevokedTokens' | 'pruneEvents' | 'pruneChangeLog' | 'pruneDeliveries' | 'pruneConsoleSessions'>
  logger: Logger
  /** a revocation is forgotten this long after its token's exp (clock/grace.ts), by the database's clock */
  revocationGraceSeconds: number
  eventRetentionDays: number
  /** between rounds (default 10 min) */
  everyMs?: number
}

export function createHousekeeping(options: HousekeepingOptions): Housekeeping {
  const { store, revocationGraceSeconds, eventRetentionDays } = options
  const log = options.logger.child({ component: 'housekeeping' })
  const runOnce = async () => ({
    revokedTokens: await store.pruneRevokedTokens(revocationGraceSeconds),
    events: await store.pruneEvents(eventRetentionDays),
    // a webhook's deliveries are kept as long as the events they carried
    webhookDeliveries: await store.pruneDeliveries(eventRetentionDays),
    // no session lives past its 12 h, ended or not
    consoleSessions: await store.pruneConsoleSessions(CONSOLE_SESSION_MAX_AGE_SECONDS),
  })
  const failed = (what: string) => (error: unknown) => log.warn({ err: error instanceof Error ? error.message : String(error) }, `${what} failed; next round retries`)
  const timers = [
    setInterval(() => runOnce().then((pruned) => log.debug(pruned, 'pruned'), failed('housekeeping round')), options.everyMs ?? 10 * 60_000),
    setInterval(() => store.pruneChangeLog(CHANGE_LOG_RETENTION_MS).catch(failed('pruning the change log')), CHANGE_LOG_PRUNE_EVERY_MS),
  ]
  for (const timer of timers) timer.unref()
  return { runOnce, stop: () => timers.forEach(clearInterval) }
}
