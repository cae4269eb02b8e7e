import { setTimeout as sleep } from 'node:timers/promises'
import { inspect } from 'node:util'

export { sleep }

export interface PollOptions<T> {
  /** give up after this long (default 15 s: generous, since nothing in the suite is timed) */
  timeoutMs?: number
  /** pause between two probes (default 50 ms) */
  everyMs?: number
  /** when the probe's value is good enough (default: it is truthy) */
  until?: (value: T) => boolean
}

/**
 * Calls `probe` until its value satisfies `until`, and returns that value. A probe that
 * throws counts as "not yet". On timeout the error names `what` and the last value or
 * error the probe gave, so a failing run says what the test was looking at.
 */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, options: PollOptions<T> = {}): Promise<T> {
  const { timeoutMs = 15_000, everyMs = 50, until = Boolean } = options
  const end = Date.now() + timeoutMs
  let last: { value: T } | { error: unknown } | undefined
  for (;;) {
    try {
      const value = await probe()
      if (until(value)) return value
      last = { value }
    } catch (error) {
      last = { error }
    }
    if (Date.now() >= end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last saw ${describe(last)}`)
    await sleep(everyMs)
  }
}

function describe(last: { value: unknown } | { error: unknown } | undefined): string {
  if (last === undefined) return 'nothing (the probe never finished)'
  const text = 'error' in last ? `error: ${last.error instanceof Error ? last.error.message : inspect(last.error)}` : inspect(last.value, { depth: 4, breakLength: Infinity })
  return text.length > 2000 ? `${text.slice(0, 2000)}…` : text
}
