import type { RedisSentinelConnection } from '../../config.js'
import { createSentinelClient, serverAddress } from './redis-connection.js'

/**
 * What a majority of the sentinels say the primary is, asked every tick (`SENTINEL MASTER
 * <name>`: its address and the config epoch of the failover that made it). A failover
 * leaves the old primary serving for seconds (Sentinel demotes it only after it saw the
 * new one for a while), so a node subscribed there would hear nothing written on the new
 * one; the lease on that connection says nothing about that. Two rules close it (the
 * argument is in docs/how-it-works.md, "Redis Sentinel: failover"):
 *
 * - a node trusts its cache only while a majority of sentinels, asked within the last
 *   lease, name the server its subscriber is connected to (`vouchedUntil`), and flushes it
 *   whenever the primary a majority names changes (`onPrimaryChanged`);
 * - a writer answers only once a majority, asked after its PUBLISH was answered, named the
 *   server that answered it, and a lease has passed since its view first had that majority
 *   (`confirm`).
 *
 * A primary is `address@config-epoch`: a failover back to the same address is a new one.
 * Every time is this node's monotonic clock.
 */
export interface SentinelWatchOptions {
  connection: RedisSentinelConnection
  leaseMs: number
  /** how long one SENTINEL MASTER may take before the next one goes out beside it */
  queryTimeoutMs: number
  now: () => number
  /** The primary a majority names changed (undefined: no majority names one). */
  onPrimaryChanged(address: string | undefined): void
  onError(error: Error): void
}

export interface SentinelWatch {
  /** Asks every sentinel that has no question outstanding. */
  poll(): void
  /** The primary's address a majority of the latest answers names, if any. */
  primaryAddress(): string | undefined
  /** Until when (this clock) a majority asked within the lease vouches for `primaryAddress`; 0: none does. */
  vouchedUntil(): number
  /**
   * Resolves with the time since which this node's view has had a majority naming `address`,
   * once a majority of sentinels asked after `after` named it; undefined when they name
   * another, or no majority answered within `timeoutMs`.
   */
  confirm(address: string, after: number, timeoutMs: number): Promise<number | undefined>
  close(): void
}

interface Answer {
  /** address@config-epoch */
  primary: string
  address: string
  sentAt: number
}

interface Waiter {
  address: string
  after: number
  resolve(since: number | undefined): void
  timer: NodeJS.Timeout
}

export function createSentinelWatch(options: SentinelWatchOptions): SentinelWatch {
  const { connection, now } = options
  const quorum = Math.floor(connection.sentinels.length / 2) + 1
  const sentinels = connection.sentinels.map((address) => {
    const client = createSentinelClient(connection, address, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      enableReadyCheck: false,
      connectTimeout: Math.max(1000, options.queryTimeoutMs),
      retryStrategy: (attempt) => Math.min(500, 25 * 2 ** Math.min(attempt, 5)),
    })
    client.on('error', (error: Error) => options.onError(error))
    return { client, latest: undefined as Answer | undefined, askedAt: Number.NEGATIVE_INFINITY }
  })
  let current: { primary: string; address: string; since: number } | undefined
  let vouchedUntil = 0
  let lastRoundAt = Number.NEGATIVE_INFINITY
  const waiters = new Set<Waiter>()
  let closed = false

  function ask(sentinel: (typeof sentinels)[number]): void {
    const sentAt = now()
    sentinel.askedAt = sentAt
    ;(sentinel.client.call('SENTINEL', 'MASTER', connection.name) as Promise<unknown>).then(
      (reply) => {
        if (sentinel.askedAt === sentAt) sentinel.askedAt = Number.NEGATIVE_INFINITY
        const fields = fieldsOf(reply)
        if (fields.ip === undefined || fields.port === undefined || fields['config-epoch'] === undefined) return
        const address = serverAddress(fields.ip, fields.port)
        if (sentinel.latest === undefined || sentinel.latest.sentAt < sentAt) sentinel.latest = { primary: `${address}@${fields['config-epoch']}`, address, sentAt }
        update()
      },
      () => {
        if (sentinel.askedAt === sentAt) sentinel.askedAt = Number.NEGATIVE_INFINITY
      },
    )
  }

  function round(): void {
    lastRoundAt = now()
    for (const sentinel of sentinels) ask(sentinel)
  }

  function update(): void {
    const answers = sentinels.map((s) => s.latest).filter((a): a is Answer => a !== undefined)
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
    const fresh = sentinels.map((s) => s.latest).filter((a): a is Answer => a !== undefined && a.sentAt > waiter.after)
    const naming = current && current.address === waiter.address ? fresh.filter((a) => a.primary === current!.primary).length : 0
    const otherwise = fresh.filter((a) => a.address !== waiter.address).length
    if (naming >= quorum) finish(waiter, current!.since)
    else if (otherwise > sentinels.length - quorum) finish(waiter, undefined)
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
      for (const sentinel of sentinels) if (at - sentinel.askedAt > options.queryTimeoutMs) ask(sentinel)
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
      for (const sentinel of sentinels) sentinel.client.disconnect()
    },
  }
}

/** SENTINEL MASTER's flat [field, value, …] reply as a record. */
function fieldsOf(reply: unknown): Record<string, string> {
  const fields: Record<string, string> = {}
  if (!Array.isArray(reply)) return fields
  for (let i = 0; i + 1 < reply.length; i += 2) fields[String(reply[i])] = String(reply[i + 1])
  return fields
}
