import type { Logger } from 'pino'
import type { Change, RowChanged } from '../domain.js'
import type { BusMetrics } from './bus-metrics.js'

export interface Listeners {
  onChange(handler: (change: Change | RowChanged) => void): void
  onEpochChange(handler: () => void): void
  /** Hands a change to every handler, in arrival order; one that throws starts a new epoch. */
  deliver(change: Change | RowChanged): void
  /** Changes may have been missed: every cache must be flushed. */
  newEpoch(reason: string): void
  epoch(): number
}

/** What a bus tells the caches: each change, and each new epoch (counted, with its reason). */
export function createListeners(count: Pick<BusMetrics, 'epoch' | 'error'>, log: Logger): Listeners {
  const changeHandlers: Array<(change: Change | RowChanged) => void> = []
  const epochHandlers: Array<() => void> = []
  let epoch = 0

  function runAll<T>(handlers: Array<(value: T) => void>, value: T, failed: () => void): void {
    for (const handler of handlers) {
      try {
        handler(value)
      } catch (error) {
        count.error('handler')
        log.error({ err: error }, 'bus handler threw')
        failed()
      }
    }
  }

  function newEpoch(reason: string): void {
    epoch++
    count.epoch(reason)
    runAll(epochHandlers, undefined, () => log.error('epoch handler failed'))
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
