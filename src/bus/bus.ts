import type { AgentState, UserState } from '../domain.js'

/** A committed change that every node's caches must see before the write answers. */
export type Change =
  | { kind: 'user'; state: UserState }
  | { kind: 'agent'; state: AgentState }
  /** API keys travel without their secret hash: a revoked key is evicted and re-read. */
  | { kind: 'apiKey'; keyId: string; revision: number }

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
  /** Called for every change, local and remote, in arrival order. */
  onChange(handler: (change: Change) => void): void
  /** Called when changes may have been missed: every cache must be flushed. */
  onEpochChange(handler: () => void): void
  /** Cheap enough for every request. */
  trusted(): boolean
  health(): BusHealth
  close(): Promise<void>
}
