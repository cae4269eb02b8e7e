import type { Logger } from 'pino'
import type { Store } from './store/store.js'

/**
 * Rows kept only for a while, forgotten off the request path: revocations of tokens that
 * have expired (nothing left to refuse), and audit events past EVENT_RETENTION_DAYS. Every
 * node runs it; the deletes are idempotent.
 */
export interface Housekeeping {
  /** One round now (tests); how many rows each kind lost. */
  runOnce(): Promise<{ revokedTokens: number; events: number }>
  stop(): void
}

export interface HousekeepingOptions {
  store: Pick<Store, 'pruneRevokedTokens' | 'pruneEvents'>
  logger: Logger
  clockToleranceSeconds: number
  eventRetentionDays: number
  /** between rounds (default 10 min) */
  everyMs?: number
}

export function createHousekeeping(options: HousekeepingOptions): Housekeeping {
  const { store, clockToleranceSeconds, eventRetentionDays } = options
  const log = options.logger.child({ component: 'housekeeping' })
  const runOnce = async () => ({ revokedTokens: await store.pruneRevokedTokens(clockToleranceSeconds), events: await store.pruneEvents(eventRetentionDays) })
  const timer = setInterval(() => {
    runOnce().then(
      (pruned) => log.debug(pruned, 'pruned'),
      (error: unknown) => log.warn({ err: error instanceof Error ? error.message : String(error) }, 'housekeeping round failed; next round retries'),
    )
  }, options.everyMs ?? 10 * 60_000)
  timer.unref()
  return { runOnce, stop: () => clearInterval(timer) }
}
