/** at most one log line per this long for each kind of repeated failure */
export const LOG_EVERY_MS = 5000

/** The part of a logger (pino's, Fastify's) a throttled log writes through. */
export interface LevelLogger {
  warn(fields: object, message: string): void
  error(fields: object, message: string): void
}

/**
 * Logs each `what` at most once per LOG_EVERY_MS: a storm of one failure (a bus that keeps
 * dropping, a store that is away while verifications keep coming) never floods the log.
 * Whoever calls it counts every occurrence on /metrics; the log only says why.
 */
export function throttledLog(log: LevelLogger, now: () => number, level: 'warn' | 'error' = 'warn'): (what: string, fields: Record<string, unknown>) => void {
  const lastLogged = new Map<string, number>()
  return (what, fields) => {
    const at = now()
    if (at - (lastLogged.get(what) ?? -Infinity) < LOG_EVERY_MS) return
    lastLogged.set(what, at)
    log[level](fields, what)
  }
}
