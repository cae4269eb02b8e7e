import type { Logger } from 'pino'
import type { Change, RowChanged } from '../domain.js'
import type { BusMetrics } from './bus-metrics.js'
import type { Applied, ChangeHandler } from './bus.js'

export interface Listeners {
  onChange(handler: ChangeHandler): void
  onEpochChange(handler: () => void): void
  /**
   * Hands a change to every handler, in arrival order; one that throws (or whose promise
   * rejects) starts a new epoch. A promise when a handler returned one: it resolves once all
   * have settled, and rejects if one failed (the change must not be acknowledged). What the
   * handlers did (sessions ended) is summed for the acknowledgement.
   */
  deliver(change: Change | RowChanged): Applied | Promise<Applied>
  /** Changes may have been missed: every cache must be flushed. */
  newEpoch(reason: string): void
  epoch(): number
}

/** What a bus tells the caches: each change, and each new epoch (counted, with its reason). */
export function createListeners(count: Pick<BusMetrics, 'epoch' | 'error'>, log: Pick<Logger, 'error'>): Listeners {
  const changeHandlers: ChangeHandler[] = []
  const epochHandlers: Array<() => void> = []
  let epoch = 0

  function runAll<T>(handlers: Array<(value: T) => Applied | void | Promise<Applied | void>>, value: T, failed: () => void): Applied | Promise<Applied> {
    let pending: Array<Promise<Applied | void>> | undefined
    let sessionsEnded = 0
    const fail = (error: unknown) => {
      count.error('handler')
      log.error({ err: error }, 'bus handler threw')
      failed()
    }
    for (const handler of handlers) {
      try {
        const done = handler(value)
        if (done instanceof Promise) (pending ??= []).push(done)
        else if (done) sessionsEnded += done.sessionsEnded
      } catch (error) {
        fail(error)
      }
    }
    if (pending === undefined) return { sessionsEnded }
    return Promise.all(pending).then(
      (results) => ({ sessionsEnded: results.reduce((sum, result) => sum + (result ? result.sessionsEnded : 0), sessionsEnded) }),
      (error) => {
        fail(error)
        throw error
      },
    )
  }

  function newEpoch(reason: string): void {
    epoch++
    count.epoch(reason)
    void runAll(epochHandlers, undefined, () => log.error('epoch handler failed'))
  }

  return {
    onChange: (handler) => void changeHandlers.push(handler),
    onEpochChange: (handler) => void epochHandlers.push(handler),
    // A change we could not apply may leave a stale entry: start afresh.
    deliver: (change) => runAll(changeHandlers, change, () => (log.error({ kind: change.kind }, 'change handler failed; flushing caches'), newEpoch('handler_error'))),
    newEpoch,
    epoch: () => epoch,
  }
}
