import { LRUCache } from 'lru-cache'

/** Anything cached carries the revision of the row it came from. */
export interface Revisioned {
  revision: number
}

/**
 * A bound in bytes besides the bound in entries: `bytesOf` estimates what an entry holds
 * (it runs on every store and eviction, so it must be cheap, and give the same answer for
 * the same key and value), and the least recently used entries are evicted until the
 * estimates sum to at most `maxBytes`. An entry estimated above the whole budget is not
 * kept at all. Evicting is always safe: the next read is a miss.
 */
export interface ByteBudget<V> {
  maxBytes: number
  bytesOf: (key: string, value: V) => number
}

/** Taken before a fill reads the store; the fill lands only if nothing it could miss happened since. */
export interface FillTicket {
  readonly epoch: number
  readonly seq: number
}

/**
 * An LRU of row states kept coherent by change messages, built so that no interleaving
 * of fills, changes and epoch changes can leave an older state in place of a newer one:
 *
 * - a change (message) wins over any cached state with a lower revision, arriving in any
 *   order, any number of times (revisions only grow: apply max, never go back); it never
 *   creates an entry, since an absent key may have held something newer;
 * - a fill (a store read on a miss) lands only if, since its ticket was taken, the epoch
 *   did not change and no change for its key was applied — a change that raced the read
 *   may be newer than what the read saw, even when its entry was evicted meanwhile;
 * - `flush()` starts a new epoch: every entry and every fill in flight from before is void.
 *
 * Whether the cache may be *trusted* at all (is the channel alive?) is not its concern:
 * the caller asks the invalidation bus before every read.
 */
export class CoherentCache<V extends Revisioned> {
  private readonly entries: LRUCache<string, V>
  private epoch = 0
  /** changes applied in this epoch */
  private seq = 0
  /** key → seq of its latest change; bounded, and `forgottenUpTo` says what it forgot */
  private readonly recentChanges = new Map<string, number>()
  private forgottenUpTo = 0
  /** the estimates of the entries held, summed here rather than by lru-cache (see the constructor) */
  private heldBytes = 0
  private clearing = false
  private readonly budget: ByteBudget<V> | undefined
  hits = 0
  misses = 0
  discardedFills = 0

  constructor(
    max: number,
    private readonly recentLimit = 8192,
    budget?: ByteBudget<V>,
  ) {
    this.budget = budget
    // lru-cache's own maxSize would keep every entry's size in one more array slot (8 bytes
    // a user); the estimate is a function of the key and value, so it is computed again
    // when an entry leaves (evicted by count, replaced, deleted or cleared) instead.
    this.entries = new LRUCache<string, V>(budget === undefined ? { max } : { max, dispose: (value, key) => this.clearing || (this.heldBytes -= this.bytesOf(key, value)) })
  }

  get size(): number {
    return this.entries.size
  }

  /** The estimated bytes held (0 without a byte budget). */
  get bytes(): number {
    return this.heldBytes
  }

  get currentEpoch(): number {
    return this.epoch
  }

  /** The cached state, counting hits and misses. */
  get(key: string): V | undefined {
    const value = this.entries.get(key)
    if (value === undefined) this.misses++
    else this.hits++
    return value
  }

  ticket(): FillTicket {
    return { epoch: this.epoch, seq: this.seq }
  }

  /** Stores what a store read returned, unless something may have overtaken it. */
  fill(key: string, value: V, ticket: FillTicket): boolean {
    if (ticket.epoch !== this.epoch || this.changedSince(key, ticket.seq)) {
      this.discardedFills++
      return false
    }
    const current = this.entries.peek(key)
    if (current === undefined || current.revision < value.revision) this.store(key, value)
    return true
  }

  /**
   * Applies a change message. With a state, it replaces a cached older state; without
   * one, it evicts entries older than `revision` so the next read goes to the store.
   *
   * A message never creates an entry: when the key is absent, a newer state may have been
   * applied and then evicted or flushed, and this message may be a late one (a writer that
   * stalled between its commit and its publish). Only a fill, which read the store after
   * its ticket, may bring a key into the cache.
   */
  apply(key: string, revision: number, value?: V): void {
    this.seq++
    this.remember(key)
    const current = this.entries.peek(key)
    if (current === undefined || current.revision >= revision) return
    if (value !== undefined) this.store(key, value)
    else this.entries.delete(key)
  }

  /** Forgets everything and voids the fills in flight: the caller could not vouch for it. */
  flush(): void {
    this.epoch++
    this.seq = 0
    this.forgottenUpTo = 0
    this.recentChanges.clear()
    // a million entries go at once: no estimate to compute again for each
    this.clearing = true
    this.entries.clear()
    this.clearing = false
    this.heldBytes = 0
  }

  /** Sets a newer state, then evicts the least recently used entries while over the byte budget. */
  private store(key: string, value: V): void {
    if (this.budget === undefined) {
      this.entries.set(key, value)
      return
    }
    if (this.entries.peek(key) === value) return // lru-cache disposes of nothing then: nothing to count
    const bytes = this.bytesOf(key, value)
    if (bytes > this.budget.maxBytes) {
      // too big to keep at all; the older state it replaces must not stay either
      this.entries.delete(key)
      return
    }
    this.entries.set(key, value) // the state it replaces, or one evicted by count, is disposed of
    this.heldBytes += bytes
    while (this.heldBytes > this.budget.maxBytes) this.entries.pop() // never this entry: it is the most recent, and fits
  }

  private bytesOf(key: string, value: V): number {
    return Math.max(1, Math.ceil(this.budget!.bytesOf(key, value)))
  }

  private changedSince(key: string, seq: number): boolean {
    if (this.seq === seq) return false
    if (this.forgottenUpTo > seq) return true
    const last = this.recentChanges.get(key)
    return last !== undefined && last > seq
  }

  private remember(key: string): void {
    if (this.recentChanges.size >= this.recentLimit && !this.recentChanges.has(key)) {
      // Forget the whole window at once; fills older than it are then refused, which is safe.
      this.forgottenUpTo = this.seq
      this.recentChanges.clear()
    }
    this.recentChanges.set(key, this.seq)
  }
}
