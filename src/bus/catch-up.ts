import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { Metrics } from '../metrics.js'
import type { RowChanged } from '../domain.js'
import type { ChangeLog } from './bus.js'

const RETRY_MS = 250
/** How often a caught-up subscription reads the change log again: the bound on how late a change whose publish failed reaches this node. */
export const CATCH_UP_EVERY_MS = 1000

export interface CatchUpOptions {
  /** the store's record of committed changes; without it every new subscription flushes */
  changeLog?: ChangeLog | undefined
  log: Logger
  metrics: Metrics
  warn: (what: string, fields: Record<string, unknown>) => void
  deliver: (change: RowChanged) => unknown
  newEpoch: (reason: string) => void
  /** how often a caught-up subscription reads the log again (default CATCH_UP_EVERY_MS) */
  everyMs?: number | undefined
}

export interface CatchUp {
  /** a subscription was confirmed: from here on every published change reaches us */
  subscribed(): void
  /** the subscription was lost (reason as counted by the bus) */
  lost(reason: string): void
  /** the current subscription has caught up (trust needs it) */
  caughtUp(): boolean
  /** when a read of the log last came back whole (Date.now()), undefined before one did */
  readAt(): number | undefined
  close(): void
}

/**
 * The one path from a committed change to this node that does not depend on its publish:
 * the change log, read from a cursor. Every read delivers (evicts) each change committed
 * since the previous read, and hands back the cursor for the next one (see
 * store/change-log.ts: a read never skips a change, however transactions interleave).
 *
 * - On a new subscription: read at once, and trust the caches again only after that read,
 *   so what was committed while there was no subscription is applied, and every other
 *   entry is kept. A change committed after the read's snapshot is published after it,
 *   so it reaches us on this subscription, or the next read has it.
 * - While subscribed: read again every `everyMs`. This is what brings a change whose
 *   publish failed (the write answered 503) or whose writer died between commit and
 *   publish: it reaches every subscribed node within one period. It also keeps the cursor
 *   recent, so a blip after days of subscription catches up instead of flushing.
 *
 * When a read cannot prove it is complete (first subscription, rows pruned, too many),
 * the caches are flushed instead: the cursor is taken before the flush, so every fill
 * after it read a store at least as new. Fills in flight are settled by their tickets:
 * each change delivered counts as a change of its key.
 */
export function createCatchUp(options: CatchUpOptions): CatchUp {
  const { changeLog, log, warn, deliver, newEpoch } = options
  const everyMs = options.everyMs ?? CATCH_UP_EVERY_MS
  // `cursor`: where the next read starts (undefined: nothing read yet). `subscription`
  // changes with every subscription confirmed or lost; `caughtUp` says the current one has read the log.
  let cursor: string | undefined
  let subscription = 0
  let caughtUp = false
  let readAt: number | undefined
  let closed = false
  let timer: NodeJS.Timeout | undefined

  const onSubscribe = options.metrics.counter('chat_auth_bus_catch_ups_total', 'Catch-ups from the change log after a new subscription, by outcome', ['outcome'])
  const periodic = options.metrics.counter('chat_auth_bus_periodic_catch_ups_total', 'Reads of the change log while subscribed, by outcome', ['outcome'])
  const delivered = options.metrics.counter('chat_auth_bus_catch_up_changes_total', 'Changes applied from the change log (after a new subscription or while subscribed)')

  const current = (which: number) => !closed && which === subscription

  /** One read; false when the subscription changed meanwhile (the next one reads from the same cursor). */
  async function read(log: ChangeLog, which: number, count: typeof periodic): Promise<boolean> {
    const result = await log.since(cursor)
    if (!current(which)) return false
    const first = cursor === undefined
    cursor = result.cursor
    if (result.complete) {
      readAt = Date.now()
      for (const change of result.changes) {
        // Nobody waits for these to be acknowledged; a failure has started a new epoch already (listeners.ts).
        const applied = deliver(change)
        if (applied instanceof Promise) applied.catch(() => {})
      }
      delivered(undefined, result.changes.length)
      count({ outcome: 'complete' })
      if (result.changes.length) options.log.debug({ changes: result.changes.length }, 'applied changes from the change log')
    } else {
      count({ outcome: first ? 'first' : 'incomplete' })
      if (!first) warn('change log cannot prove the catch-up complete: flushing caches', {})
      newEpoch(first ? 'subscribed' : 'catch_up_incomplete')
    }
    return true
  }

  async function catchUp(log: ChangeLog, which: number): Promise<void> {
    while (current(which)) {
      try {
        if (!(await read(log, which, onSubscribe))) return
        caughtUp = true
        options.log.info('caught up from the change log')
        return schedule(log, which)
      } catch (error) {
        onSubscribe({ outcome: 'failed' })
        warn('catch-up from the change log failed; retrying (the caches stay untrusted)', { err: (error as Error).message })
        await sleep(RETRY_MS)
      }
    }
  }

  function schedule(log: ChangeLog, which: number): void {
    timer = setTimeout(() => void readAgain(log, which), everyMs)
    timer.unref()
  }

  async function readAgain(log: ChangeLog, which: number): Promise<void> {
    if (!current(which)) return
    try {
      await read(log, which, periodic)
    } catch (error) {
      // Trust does not rest on this read (the subscription carries every published change): try again next period.
      periodic({ outcome: 'failed' })
      warn('reading the change log failed; trying again next period', { err: (error as Error).message })
    }
    if (current(which)) schedule(log, which)
  }

  return {
    subscribed() {
      const which = ++subscription
      caughtUp = false
      clearTimeout(timer)
      if (changeLog) return void catchUp(changeLog, which)
      newEpoch('subscribed')
      caughtUp = true
    },
    lost(reason) {
      // A read still in flight belongs to the lost subscription: its answer is dropped.
      subscription++
      caughtUp = false
      clearTimeout(timer)
      // With a change log the caches are kept, untrusted, until the next subscription catches up.
      if (!changeLog) newEpoch(reason)
    },
    caughtUp: () => caughtUp,
    readAt: () => readAt,
    close() {
      closed = true
      clearTimeout(timer)
    },
  }
}
