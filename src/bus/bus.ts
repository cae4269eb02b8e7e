import type { Change, RowChanged } from '../domain.js'

/** What a node's handling of a change did, as its acknowledgement reports it (a receipt's line). */
export interface Applied {
  /** open sessions (SPEC §8.1) the change ended on this node */
  sessionsEnded: number
}

/** What a node does with a change; a promise holds its acknowledgement until it settles. */
export type ChangeHandler = (change: Change | RowChanged) => Applied | void | Promise<Applied | void>

/**
 * SPEC §10.2: where a change has arrived, as the node that published it saw it. `nodes` is
 * every node registered when the change went out (the publisher among them); `ackedAfterMs`
 * is how long after the publish began (right after the commit) each acknowledgement came,
 * null for a node that did not acknowledge in time (it stopped trusting its cache within a
 * lease, and refuses the change's tokens from then on). `outcome`: every node acknowledged;
 * the writer waited out the lease of one that did not (or of a subscriber it could not
 * name); or the embedded store's single node.
 */
export interface Receipt {
  changeId: string
  outcome: 'acknowledged' | 'lease_expired' | 'embedded'
  nodes: Array<{ nodeId: string; ackedAfterMs: number | null; sessionsEnded: number | null }>
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

/** A question every node answers: how many open sessions (SPEC §8.1) of a company or an agent it holds. */
export interface Question {
  scope: 'company' | 'agent'
  key: string
}

/** What a live node wrote of itself (undefined: nothing yet, or nothing readable). */
export interface NodeStatusRecord {
  nodeId: string
  status: Record<string, unknown> | undefined
}

/**
 * SPEC §10.2 across nodes (bus/publishing/board.ts): what the live nodes say of themselves,
 * and their answers to a question asked of them all. A bus of one node has none.
 */
export interface NodeBoard {
  /** this node's status, written for the others to read */
  publish(status: Record<string, unknown>): void
  statuses(): Promise<NodeStatusRecord[]>
  /** how this node answers a question */
  onQuestion(handler: (question: Question) => number): void
  /** the sum of the live nodes' answers, and how many of them answered */
  ask(question: Question): Promise<{ total: number; nodes: number; answered: number }>
}

export interface BusHealth {
  /** the channel is up (for /readyz) */
  ready: boolean
  /** caches may be served from right now */
  trusted: boolean
  epoch: number
  /** when the change log was last read whole (ms since the epoch; undefined: never, or a bus with no log) */
  changeLogReadAt?: number | undefined
  /** host:port of the Redis server the node follows, and whether its subscription is live (undefined: no Redis) */
  redis?: { follows: string | undefined; subscribed: boolean } | undefined
}

/**
 * Carries committed changes to the caches of every node.
 *
 * The contract a write relies on: when `publish` resolves, every node either has applied
 * the change or can no longer serve from its cache (its trust has lapsed), so no node
 * accepts what the change made invalid. A bus that cannot promise that must reject.
 */
export interface InvalidationBus {
  /** this node's name on the bus (in receipts and the node listing) */
  readonly nodeId: string
  start(): Promise<void>
  /** Resolves with where the change arrived (see the contract above); rejects when it cannot promise it. */
  publish(change: Change): Promise<Receipt>
  /**
   * Called for every change, local and remote, in arrival order: a local one as the
   * committed `Change`, a remote one as a `RowChanged` (evict, never install). A handler
   * that returns a promise holds the node's acknowledgement (and, for the node's own
   * change, its `publish`) until it settles: what must be done before a writer may answer
   * (ending the sessions a change ends) is done by then. It must settle well within the
   * lease: past it the writer stops waiting for this node, as for one whose lease lapsed.
   * Caches answer synchronously.
   */
  onChange(handler: ChangeHandler): void
  /** Called when changes may have been missed: every cache must be flushed. */
  onEpochChange(handler: () => void): void
  /** Cheap enough for every request. */
  trusted(): boolean
  health(): BusHealth
  /** the other nodes (over Redis); undefined on a bus of one node */
  readonly board?: NodeBoard | undefined
  close(): Promise<void>
}
