import type { Applied, InvalidationBus } from './bus/bus.js'
import { appliedChange, type AppliedChange } from './domain.js'

/**
 * What a committed change does on a node, in this order, whichever node wrote it and
 * whichever bus brought it. The only handler either bus calls (no other module subscribes):
 *
 * 1. caches: the written state installed, or the row evicted (synchronous: a verification
 *    that starts after this sees the change);
 * 2. sessions: those the change ends are aborted (a promise while it re-reads a row);
 * 3. event streams: the change's events handed to the live streams (a promise while it reads);
 * 4. webhooks: the sender woken (never waited for: a write never waits for a delivery).
 *
 * The promise it returns settles once 2 and 3 have (with the number of sessions ended, which
 * the acknowledgement carries to the writer's receipt): the node's acknowledgement of the change
 * (and, on the writer, its publish) waits for it, so that when a revocation answers 200 the
 * sessions and streams it ends have been ended and told on every node that acknowledged it.
 * A step that fails still lets the others run, and the change is then not acknowledged (the
 * writer waits out this node's lease) and the bus starts a new epoch.
 *
 * On a new epoch (changes may have been missed): the caches are flushed, then every open
 * session is read again.
 */
export interface ChangeSteps {
  caches: { apply(change: AppliedChange): void; flush(): void }
  /** how many open sessions the change ended (a promise while it reads) */
  sessions: { onChange(change: AppliedChange): number | Promise<number>; onEpoch(): void }
  streams: { onChange(): void | Promise<void> }
  webhooks: { nudge(): void }
}

/**
 * The change through each step, in order; a promise while step 2 or 3 holds the
 * acknowledgement. What it did (the sessions it ended) goes into the acknowledgement and,
 * on the writer, the receipt.
 */
export function applyChange(steps: ChangeSteps, change: AppliedChange): Applied | Promise<Applied> {
  let failure: { error: unknown } | undefined
  let sessions: number | Promise<number> = 0
  let streams: void | Promise<void>
  const step = <T>(run: () => T): T | undefined => {
    try {
      return run()
    } catch (error) {
      failure ??= { error }
      return undefined
    }
  }
  step(() => steps.caches.apply(change))
  sessions = step(() => steps.sessions.onChange(change)) ?? 0
  streams = step(() => steps.streams.onChange())
  step(() => steps.webhooks.nudge())
  if (failure !== undefined) {
    const { error } = failure
    return Promise.allSettled([sessions, streams]).then(() => Promise.reject(error))
  }
  if (!(sessions instanceof Promise) && streams === undefined) return { sessionsEnded: sessions }
  return Promise.all([sessions, streams]).then(([sessionsEnded]) => ({ sessionsEnded }))
}

/** A new epoch: caches flushed before the sessions are read again (a re-check never meets a stale cache). */
export function applyEpoch(steps: ChangeSteps): void {
  steps.caches.flush()
  steps.sessions.onEpoch()
}

/** Makes `steps` the bus's one handler of changes and of epochs. */
export function openChangePipeline(bus: Pick<InvalidationBus, 'onChange' | 'onEpochChange'>, steps: ChangeSteps): void {
  bus.onChange((change) => applyChange(steps, appliedChange(change)))
  bus.onEpochChange(() => applyEpoch(steps))
}

const NO_STEP: Omit<ChangeSteps, 'caches'> = { sessions: { onChange: () => 0, onEpoch() {} }, streams: { onChange() {} }, webhooks: { nudge() {} } }

/** The steps of a node built from some of its parts only (a test's, a bench's): the others do nothing. */
export function someSteps(steps: Pick<ChangeSteps, 'caches'> & Partial<ChangeSteps>): ChangeSteps {
  return { ...NO_STEP, ...steps }
}
