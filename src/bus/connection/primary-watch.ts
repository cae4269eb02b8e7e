/**
 * Which server is the primary, by a majority of voters asked every tick: the sentinels of a
 * Sentinel deployment (sentinel-watch.ts), or the nodes of a Redis Cluster, each naming the
 * master of the bus's hash slot (cluster-watch.ts). A failover (or a slot migration) leaves
 * the old server serving for a while — a cut-off master keeps accepting writes until it
 * notices — so a node subscribed there would hear nothing written on the new one; the lease
 * on that connection says nothing about that. Two rules close it (docs/how-it-works.md):
 *
 * - a node trusts its cache only while a majority of voters, asked within the last lease,
 *   name the server its subscriber is connected to (`vouchedUntil`), and flushes it whenever
 *   the primary a majority names changes (`onPrimaryChanged`);
 * - a writer answers only once a majority, asked after its PUBLISH was answered, named the
 *   server that answered it, and a lease has passed since its view first had that majority
 *   (`confirm`).
 *
 * A primary is `address@config-epoch`: a failover back to the same address is a new one.
 * Every time is this node's monotonic clock.
 */
export interface PrimaryWatch {
  /** Asks every voter that has no question outstanding. */
  poll(): void
  /** The primary's address a majority of the latest answers names, if any. */
  primaryAddress(): string | undefined
  /** Until when (this clock) a majority asked within the lease vouches for `primaryAddress`; 0: none does. */
  vouchedUntil(): number
  /**
   * Resolves with the time since which this node's view has had a majority naming `address`,
   * once a majority of voters asked after `after` named it; undefined when they name
   * another, or no majority answered within `timeoutMs`.
   */
  confirm(address: string, after: number, timeoutMs: number): Promise<number | undefined>
  close(): void
}

/** One voter's answer: the primary it names (`address@config-epoch`) and its address. */
export interface Named {
  primary: string
  address: string
}

/** One voter: asked, it names the primary (undefined: it names none, or its answer is unusable). */
export interface Voter {
  ask(): Promise<Named | undefined>
  close(): void
}

export interface PrimaryWatchOptions {
  voters: Voter[]
  leaseMs: number
  /** how long one question may take before the next one goes out beside it */
  queryTimeoutMs: number
  now: () => number
  /** The primary a majority names changed (undefined: no majority names one). */
  onPrimaryChanged(address: string | undefined): void
}

interface Answer extends Named {
  sentAt: number
}

interface Waiter {
  address: string
  after: number
  resolve(since: number | undefined): void
  timer: NodeJS.Timeout
}

export function createPrimaryWatch(options: PrimaryWatchOptions): PrimaryWatch {
  const { now } = options
  const quorum = Math.floor(options.voters.length / 2) + 1
  const voters = options.voters.map((voter) => ({ voter, latest: undefined as Answer | undefined, askedAt: Number.NEGATIVE_INFINITY }))
  let current: { primary: string; address: string; since: number } | undefined
  let vouchedUntil = 0
  let lastRoundAt = Number.NEGATIVE_INFINITY
  const waiters = new Set<Waiter>()
  let closed = false

  function ask(entry: (typeof voters)[number]): void {
    const sentAt = now()
    entry.askedAt = sentAt
    entry.voter.ask().then(
      (named) => {
        if (entry.askedAt === sentAt) entry.askedAt = Number.NEGATIVE_INFINITY
        if (named === undefined) return
        if (entry.latest === undefined || entry.latest.sentAt < sentAt) entry.latest = { ...named, sentAt }
        update()
      },
      () => {
        if (entry.askedAt === sentAt) entry.askedAt = Number.NEGATIVE_INFINITY
      },
    )
  }

  function round(): void {
    lastRoundAt = now()
    for (const entry of voters) ask(entry)
  }

  function update(): void {
    const answers = voters.map((v) => v.latest).filter((a): a is Answer => a !== undefined)
    const counts = new Map<string, number>()
    for (const answer of answers) counts.set(answer.primary, (counts.get(answer.primary) ?? 0) + 1)
    const majority = [...counts].find(([, count]) => count >= quorum)?.[0]
    if (majority !== current?.primary) {
      const answer = answers.find((a) => a.primary === majority)
      current = majority === undefined || answer === undefined ? undefined : { primary: majority, address: answer.address, since: now() }
      vouchedUntil = 0
      options.onPrimaryChanged(current?.address)
    }
    if (current) {
      const sentTimes = answers
        .filter((a) => a.primary === current!.primary)
        .map((a) => a.sentAt)
        .sort((a, b) => b - a)
      vouchedUntil = sentTimes.length >= quorum ? sentTimes[quorum - 1]! + options.leaseMs : 0
    }
    for (const waiter of waiters) settle(waiter)
  }

  function settle(waiter: Waiter): void {
    const fresh = voters.map((v) => v.latest).filter((a): a is Answer => a !== undefined && a.sentAt > waiter.after)
    const naming = current && current.address === waiter.address ? fresh.filter((a) => a.primary === current!.primary).length : 0
    const otherwise = fresh.filter((a) => a.address !== waiter.address).length
    if (naming >= quorum) finish(waiter, current!.since)
    else if (otherwise > voters.length - quorum) finish(waiter, undefined)
  }

  function finish(waiter: Waiter, since: number | undefined): void {
    clearTimeout(waiter.timer)
    waiters.delete(waiter)
    waiter.resolve(since)
  }

  return {
    poll() {
      if (closed) return
      const at = now()
      for (const entry of voters) if (at - entry.askedAt > options.queryTimeoutMs) ask(entry)
    },
    primaryAddress: () => current?.address,
    vouchedUntil: () => vouchedUntil,
    confirm(address, after, timeoutMs) {
      if (closed) return Promise.resolve(undefined)
      return new Promise((resolve) => {
        const waiter: Waiter = { address, after, resolve, timer: setTimeout(() => finish(waiter, undefined), Math.max(0, timeoutMs)) }
        waiters.add(waiter)
        // One round serves every writer whose publish was answered before it went out.
        if (lastRoundAt <= after) round()
        else settle(waiter)
      })
    },
    close() {
      closed = true
      for (const waiter of waiters) finish(waiter, undefined)
      for (const entry of voters) entry.voter.close()
    },
  }
}
