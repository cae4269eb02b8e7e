/** at most one log line per this long for each kind of repeated failure */
export const LOG_EVERY_MS = 5000

const FORGET_FROM = 10_000

/** The part of a logger (pino's, Fastify's) a throttled log writes through. */
export interface LevelLogger {
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
}

/**
 * Logs each `what` at most once per LOG_EVERY_MS: a storm of one failure (a bus that keeps
 * dropping, a store that is away while verifications keep coming) never floods the log.
 * Whoever calls it counts every occurrence on /metrics; the log only says why. `key`
 * throttles one `what` per subject instead (a company: one's storm never hides another's).
 */
export function throttledLog(log: LevelLogger, now: () => number, level: 'warn' | 'error' = 'warn'): (what: string, fields: Record<string, unknown>, key?: string) => void {
  const lastLogged = new Map<string, number>()
  return (what, fields, key = what) => {
    const at = now()
    if (at - (lastLogged.get(key) ?? -Infinity) < LOG_EVERY_MS) return
    // Keys past their interval throttle nothing: forgotten once there are many.
    if (lastLogged.size >= FORGET_FROM) for (const [old, loggedAt] of lastLogged) if (at - loggedAt >= LOG_EVERY_MS) lastLogged.delete(old)
    lastLogged.set(key, at)
    log[level](fields, what)
  }
}
