/**
 * The lease and trust arithmetic of one node, pure: every time is a reading of the node's
 * own monotonic clock, passed in by the caller.
 *
 * - Lease: a pong on the subscriber connection proves every message Redis queued for us
 *   before the ping was handled (replies are ordered), so the cache may be trusted until
 *   the ping's send time + leaseMs.
 * - Registration: our entry in the registry lives `ttlMs` of Redis time from when the
 *   script ran, which is no earlier than when we sent it; trust needs it certainly alive,
 *   and made on the Redis instance (run_id) we are subscribed to.
 * - A writer that waits `writerWaitMs` of its own clock after its PUBLISH was answered
 *   knows that a node still trusting then holds a lease from a ping sent after the
 *   message, so the node has handled the message — whatever the clock rates within
 *   ±CLOCK_DRIFT.
 */
export const CLOCK_DRIFT = 0.01
/** Fixed slack for timer and clock-reading granularity, in ms. */
export const SLACK_MS = 2
/** How long Redis TIME may be trusted to agree with elapsed real time, in ms. */
export const REDIS_CLOCK_SLACK_MS = 10

/** How long a writer waits, on its own clock, for a node that did not acknowledge. */
export function writerWaitMs(leaseMs: number): number {
  return Math.ceil((leaseMs * (1 + CLOCK_DRIFT)) / (1 - CLOCK_DRIFT)) + SLACK_MS
}

/** A Redis process younger than this (its clock) may have subscribers of a previous one still trusting. */
export function youthMs(leaseMs: number): number {
  return writerWaitMs(leaseMs) + REDIS_CLOCK_SLACK_MS
}

export class Trust {
  private subscribedRunId: string | undefined
  /** send times of the pings on the current subscription whose pongs are still due */
  private readonly pings: number[] = []
  private leaseUntil = 0
  /** send time of the ping that gave the current lease (for tests and diagnostics) */
  private leasePingAt = Number.NEGATIVE_INFINITY
  private registeredRunId: string | undefined
  private registeredUntil = 0

  constructor(
    readonly leaseMs: number,
    readonly registrationTtlMs: number,
  ) {}

  /** The subscription to every channel is confirmed on the Redis instance `runId`. */
  subscribed(runId: string): void {
    this.subscribedRunId = runId
    this.pings.length = 0
    this.leaseUntil = 0
  }

  /** The subscriber connection is gone: nothing it said vouches for anything any more. */
  lost(): void {
    this.subscribedRunId = undefined
    this.pings.length = 0
    this.leaseUntil = 0
  }

  pingSent(now: number): void {
    if (this.subscribedRunId !== undefined) this.pings.push(now)
  }

  /** The oldest outstanding ping was answered. */
  pongReceived(): void {
    const sentAt = this.pings.shift()
    if (sentAt === undefined || sentAt + this.leaseMs <= this.leaseUntil) return
    this.leaseUntil = sentAt + this.leaseMs
    this.leasePingAt = sentAt
  }

  /** Send time of the oldest ping still unanswered. */
  oldestPing(): number | undefined {
    return this.pings[0]
  }

  /** Our registration script, sent at `sentAt`, ran on the Redis instance `runId`. */
  registered(runId: string, sentAt: number): void {
    const until = sentAt + this.registrationTtlMs * (1 - CLOCK_DRIFT) - SLACK_MS
    if (runId !== this.registeredRunId) {
      this.registeredRunId = runId
      this.registeredUntil = until
    } else {
      this.registeredUntil = Math.max(this.registeredUntil, until)
    }
  }

  /** Our registration is certainly alive at `now` on the instance that made it. */
  registeredAt(now: number): boolean {
    return this.registeredRunId !== undefined && now < this.registeredUntil
  }

  isSubscribed(): boolean {
    return this.subscribedRunId !== undefined
  }

  /** The instant (this clock) until which the cache may be trusted; 0 when it may not. */
  until(): number {
    if (this.subscribedRunId === undefined || this.subscribedRunId !== this.registeredRunId) return 0
    return Math.min(this.leaseUntil, this.registeredUntil)
  }

  trustedAt(now: number): boolean {
    return now < this.until()
  }

  /** Send time of the ping whose pong vouches for the cache now (tests). */
  vouchingPing(): number {
    return this.leasePingAt
  }
}
