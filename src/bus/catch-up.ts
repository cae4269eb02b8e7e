import type { Logger } from 'pino'
import type { Metrics } from '../metrics.js'
import type { ChangeLog, RowChanged } from './bus.js'
import { sleep } from './publisher.js'

const CATCH_UP_RETRY_MS = 250

export interface CatchUpOptions {
  /** the store's record of committed changes; without it every new subscription flushes */
  changeLog?: ChangeLog | undefined
  log: Logger
  metrics: Metrics
  warn: (what: string, fields: Record<string, unknown>) => void
  isClosed: () => boolean
  deliver: (change: RowChanged) => void
  newEpoch: (reason: string) => void
  /** UNSAFE (chaos mutant `no-epoch-flush`): trust a new subscription without catching up */
  unsafeNoEpochFlush?: boolean
  /** UNSAFE (chaos mutant `catch-up-skips-window`): read from the new subscription, not the horizon */
  unsafeCatchUpSkipsWindow?: boolean
}

export interface CatchUp {
  /** a subscription was confirmed: from here on every change reaches us */
  subscribed(): void
  /** the subscription was lost (reason as counted by the bus) */
  lost(reason: string): void
  /** the current subscription has caught up (trust needs it) */
  caughtUp(): boolean
}

/**
 * After a new subscription is confirmed, learn from the store every change that may have
 * been missed while there was none, then trust the caches again, keeping every entry that
 * did not change. Correct because the read starts after the subscription was confirmed:
 * a change committed after the read is published after it, so it reaches us on this
 * subscription (or the next catch-up has it: its xid is at or above the new horizon);
 * one committed before it is in the read (if its xid is at or above the previous horizon)
 * or was in an earlier read or flush. Fills in flight are settled by their tickets: each
 * change applied here counts as a change of its key. When the read cannot prove it is
 * complete (first subscription, rows pruned, too many), flush: the horizon is taken before
 * the flush, so every fill after it read a store at least as new.
 */
export function createCatchUp(options: CatchUpOptions): CatchUp {
  const { changeLog, log, warn, isClosed, deliver, newEpoch } = options
  const skipsWindow = options.unsafeCatchUpSkipsWindow === true
  // `horizon`: every change committed after the last completed catch-up (or flush) read the
  // log has a transaction id at or above it. `subscription` counts confirmed subscriptions;
  // `caughtUp` says the current one has caught up.
  let horizon: string | undefined
  let subscription = 0
  let caughtUp = false

  const catchUps = options.metrics.counter('chat_auth_bus_catch_ups_total', 'Catch-ups from the change log after a new subscription, by outcome', ['outcome'])
  const caughtUpChanges = options.metrics.counter('chat_auth_bus_catch_up_changes_total', 'Changes applied by catch-ups from the change log')
  if (skipsWindow) log.warn('UNSAFE: the catch-up skips what was committed while the channel was lost (chaos-test entry point)')

  async function catchUp(changeLog: ChangeLog, current: number): Promise<void> {
    while (!isClosed() && current === subscription) {
      try {
        const read = await changeLog.since(skipsWindow && horizon !== undefined ? undefined : horizon)
        if (isClosed() || current !== subscription) return // lost meanwhile: the next subscription reads from the same horizon
        if (skipsWindow && horizon !== undefined) {
          horizon = read.horizon
        } else if (read.complete) {
          for (const change of read.changes) deliver(change)
          caughtUpChanges(undefined, read.changes.length)
          catchUps({ outcome: 'complete' })
          log.info({ changes: read.changes.length }, 'caught up from the change log')
          horizon = read.horizon
        } else {
          const first = horizon === undefined
          horizon = read.horizon
          catchUps({ outcome: first ? 'first' : 'incomplete' })
          if (!first) log.warn('change log cannot prove the catch-up complete: flushing caches')
          newEpoch(first ? 'subscribed' : 'catch_up_incomplete')
        }
        caughtUp = true
        return
      } catch (error) {
        catchUps({ outcome: 'failed' })
        warn('catch-up from the change log failed; retrying (the caches stay untrusted)', { err: (error as Error).message })
        await sleep(CATCH_UP_RETRY_MS)
      }
    }
  }

  return {
    subscribed() {
      const current = ++subscription
      caughtUp = false
      if (changeLog && !options.unsafeNoEpochFlush) void catchUp(changeLog, current)
      else {
        newEpoch('subscribed')
        caughtUp = true
      }
    },
    lost(reason) {
      caughtUp = false
      // With a change log the caches are kept, untrusted, until the next subscription catches up.
      if (!changeLog) newEpoch(reason)
    },
    caughtUp: () => caughtUp,
  }
}
