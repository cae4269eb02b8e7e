/**
 * When a failed delivery is tried again: exponential backoff from `baseMs`
 * (WEBHOOK_RETRY_BASE_MS), doubling per attempt, at most an hour apart, for at least
 * `RETRY_FOR_MS` after the event: an attempt made before that time that fails is followed by
 * another, so the last one is made at or after it. With the default base of 5 s: 5 s, 10 s,
 * 20 s, … 42 min 40 s, then hourly: 34 attempts, the last about 24 h 25 min after the event.
 */
export const RETRY_FOR_MS = 24 * 60 * 60 * 1000
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000

/** The wait after the `attempts`-th failed attempt (1: the first). */
export function retryDelayMs(baseMs: number, attempts: number): number {
  return Math.min(baseMs * 2 ** Math.min(attempts - 1, 40), MAX_RETRY_DELAY_MS)
}
