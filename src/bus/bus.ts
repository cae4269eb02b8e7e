import type { AgentState, CompanyState, UserState } from '../domain.js'

/** A committed change, as the node that made it hands it to the bus. */
export type Change =
  | { kind: 'user'; state: UserState }
  | { kind: 'agent'; state: AgentState }
  /** API keys travel without their secret hash: a revoked key is evicted and re-read. */
  | { kind: 'apiKey'; keyId: string; revision: number }
  /** A company's tokens generation grew (SPEC §7.1). */
  | { kind: 'company'; state: CompanyState }
  /**
   * One token revoked by its jti (SPEC §7.1). Travels as the row `jti` at "revision" `exp`:
   * a receiver adds it to its revoked set until then (it can only refuse more, never less).
   */
  | { kind: 'token'; jti: string; exp: number }

/**
 * What another node learns of a change: which row changed, and at which revision. It
 * carries no state, so the store stays the only source of truth: a node evicts what it
 * holds of that row below that revision and reads it again when asked.
 */
export interface RowChanged {
  kind: Change['kind']
  id: string
  revision: number
}

export function rowChanged(change: Change): RowChanged {
  if (change.kind === 'apiKey') return { kind: 'apiKey', id: change.keyId, revision: change.revision }
  if (change.kind === 'token') return { kind: 'token', id: change.jti, revision: change.exp }
  return { kind: change.kind, id: change.state.id, revision: change.state.revision }
}

/**
 * The durable record of committed changes in the store, read from a cursor (see
 * store/change-log.ts): after a new subscription instead of flushing every cache, and
 * periodically while subscribed (bus/catch-up.ts).
 */
export interface ChangeLog {
  /**
   * Every change committed since the read that returned `cursor` (undefined: no read yet),
   * and the cursor to pass next time. `complete: false` when it cannot prove it returned
   * them all: the caller must flush instead.
   */
  since(cursor: string | undefined): Promise<{ complete: boolean; cursor: string; changes: RowChanged[] }>
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
