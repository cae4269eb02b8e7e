import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import type { Metrics } from '../metrics.js'
import type { RowChanged } from '../domain.js'
import type { ChangeLog, HorizonBound } from './bus.js'

const CATCH_UP_RETRY_MS = 250
/** how often a caught-up subscription moves its horizon forward (never more often than a lease) */
export const HORIZON_ADVANCE_MS = 5000

export interface CatchUpOptions {
  /** the store's record of committed changes; without it every new subscription flushes */
  changeLog?: ChangeLog | undefined
  log: Logger
  metrics: Metrics
  warn: (what: string, fields: Record<string, unknown>) => void
  isClosed: () => boolean
  deliver: (change: RowChanged) => void
  newEpoch: (reason: string) => void
  /** one PING round trip on the subscriber connection (subscriber.ts roundTrip) */
  roundTrip: () => Promise<boolean>
  /** how often the horizon advances while subscribed (default HORIZON_ADVANCE_MS; at least `leaseMs`) */
  horizonAdvanceMs?: number | undefined
  leaseMs: number
  /** UNSAFE (chaos mutant `no-epoch-flush`): trust a new subscription without catching up */
  unsafeNoEpochFlush?: boolean
  /** UNSAFE (chaos mutant `catch-up-skips-window`): read from the new subscription, not the horizon */
  unsafeCatchUpSkipsWindow?: boolean
  /** UNSAFE (chaos mutant `horizon-ignores-outbox`): advance to the snapshot's xmin, ignoring the outbox and skipping the PING round trip */
  unsafeHorizonIgnoresOutbox?: boolean
}

export interface CatchUp {
  /** a subscription was confirmed: from here on every change reaches us */
  subscribed(): void
  /** the subscription was lost (reason as counted by the bus) */
  lost(reason: string): void
  /** the current subscription has caught up (trust needs it) */
  caughtUp(): boolean
  close(): void
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
  // `horizon`: every change this node may not have applied (committed after the last catch-up
  // read, or not yet delivered at the last advance) has a transaction id at or above it. `subscription` counts confirmed subscriptions;
  // `caughtUp` says the current one has caught up.
  let horizon: string | undefined
  let subscription = 0
  let caughtUp = false

  const catchUps = options.metrics.counter('chat_auth_bus_catch_ups_total', 'Catch-ups from the change log after a new subscription, by outcome', ['outcome'])
  const caughtUpChanges = options.metrics.counter('chat_auth_bus_catch_up_changes_total', 'Changes applied by catch-ups from the change log')
  const advances = options.metrics.counter('chat_auth_bus_horizon_advances_total', 'Tries to move the catch-up horizon forward while subscribed, by outcome', ['outcome'])
  const advanceEveryMs = Math.max(options.horizonAdvanceMs ?? HORIZON_ADVANCE_MS, options.leaseMs)
  const ignoresOutbox = options.unsafeHorizonIgnoresOutbox === true
  let advanceTimer: NodeJS.Timeout | undefined
  if (ignoresOutbox) log.warn('UNSAFE: the horizon advances ignoring unconfirmed publishes (chaos-test entry point)')
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
        if (changeLog.bound) scheduleAdvance(changeLog.bound.bind(changeLog), current)
        return
      } catch (error) {
        catchUps({ outcome: 'failed' })
        warn('catch-up from the change log failed; retrying (the caches stay untrusted)', { err: (error as Error).message })
        await sleep(CATCH_UP_RETRY_MS)
      }
    }
  }

  /**
   * While subscription `current` stays confirmed and caught up, move the horizon forward, so a
   * blip after days of subscription catches up instead of flushing (rows are pruned by age).
   * The candidate is min(snapshot xmin, smallest xid in the outbox), read in one statement;
   * then one PING round trip on the subscriber; then, if still on `current`, horizon = candidate.
   * Safe: a transaction below the candidate had finished before the read and its outbox row
   * was gone, so its publish was confirmed — either after `current` was confirmed (then Redis
   * delivered it on this connection before the PONG, and it was handled), or before (then it
   * committed before this subscription's catch-up read, which covered it). A change whose
   * publish is not confirmed keeps its outbox row, so its xid holds the horizon back.
   */
  function scheduleAdvance(bound: () => Promise<HorizonBound>, current: number): void {
    clearTimeout(advanceTimer)
    advanceTimer = setTimeout(() => void advance(bound, current), advanceEveryMs)
    advanceTimer.unref()
  }

  async function advance(bound: () => Promise<HorizonBound>, current: number): Promise<void> {
    const onCurrent = () => !isClosed() && current === subscription && caughtUp
    if (!onCurrent()) return
    try {
      const read = await bound()
      let candidate = BigInt(read.snapshotXmin)
      if (!ignoresOutbox) {
        if (read.outboxWithoutXid) return advances({ outcome: 'held' })
        if (read.outboxXmin !== undefined && BigInt(read.outboxXmin) < candidate) candidate = BigInt(read.outboxXmin)
        if (!(await options.roundTrip())) return advances({ outcome: 'failed' })
      }
      if (!onCurrent()) return
      if (horizon !== undefined && candidate <= BigInt(horizon)) return advances({ outcome: 'held' })
      horizon = candidate.toString()
      advances({ outcome: 'advanced' })
    } catch (error) {
      advances({ outcome: 'failed' })
      warn('could not advance the catch-up horizon', { err: (error as Error).message })
    } finally {
      if (onCurrent()) scheduleAdvance(bound, current)
    }
  }

  return {
    close: () => clearTimeout(advanceTimer),
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
