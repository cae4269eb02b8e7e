import type { Change, RowChanged } from '../domain.js'

/**
 * The durable record of committed changes in the store, read back after the channel was
 * lost instead of flushing every cache (see migrations/003_change_log.sql).
 */
export interface ChangeLog {
  /**
   * Every change committed after the read that returned `horizon` (undefined: no read yet),
   * and the horizon to pass next time. `complete: false` when it cannot prove it returned
   * them all: the caller must flush instead.
   */
  since(horizon: string | undefined): Promise<{ complete: boolean; horizon: string; changes: RowChanged[] }>
  /** What bounds a horizon advanced while subscribed (bus/catch-up.ts); without it the horizon moves only at a catch-up. */
  bound?(): Promise<HorizonBound>
}

export interface HorizonBound {
  /** pg_snapshot_xmin of the read's snapshot: every transaction below it had finished */
  snapshotXmin: string
  /** the smallest transaction id of a change whose publish is not confirmed yet (an outbox row); undefined: none */
  outboxXmin: string | undefined
  /** an outbox row has no transaction id: nothing is known, the horizon stays */
  outboxWithoutXid: boolean
}

export interface BusHealth {
  /** the channel is up (for /readyz) */
  ready: boolean
  /** caches may be served from right now */
  trusted: boolean
  epoch: number
}

/**
 * Carries committed changes to the caches of every node.
 *
 * The contract a write relies on: when `publish` resolves, every node either has applied
 * the change or can no longer serve from its cache (its trust has lapsed), so no node
 * accepts what the change made invalid. A bus that cannot promise that must reject.
 */
export interface InvalidationBus {
  start(): Promise<void>
  publish(change: Change): Promise<void>
  /**
   * Called for every change, local and remote, in arrival order: a local one as the
   * committed `Change`, a remote one as a `RowChanged` (evict, never install).
   */
  onChange(handler: (change: Change | RowChanged) => void): void
  /** Called when changes may have been missed: every cache must be flushed. */
  onEpochChange(handler: () => void): void
  /** Cheap enough for every request. */
  trusted(): boolean
  health(): BusHealth
  close(): Promise<void>
}
