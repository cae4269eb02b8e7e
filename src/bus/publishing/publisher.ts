import { setTimeout as sleep } from 'node:timers/promises'
import { StoreUnavailableError } from '../../errors.js'
import type { RowChanged } from '../../domain.js'
import { acknowledgementWait, traced, type AcknowledgementWait } from '../../trace-points.js'
import type { AckMessage, MessageCodec } from '../messages/messages.js'
import type { PublishReply, Registry } from './registry.js'

/**
 * Publish with acknowledgements. The writer resolves once every node registered when the
 * message went out has acknowledged it (an authenticated ack bound to this message id and
 * that node id), and Redis counted no receiver beyond them; otherwise once `writerWaitMs`
 * has passed since the PUBLISH was answered, after which no node that missed the message
 * can still be trusting its cache (see lease.ts). A Redis process younger than that is
 * waited out too. If Redis cannot confirm the PUBLISH in time, it rejects: it never
 * reports a change it could not deliver.
 */
export type PublishOutcome = 'acked' | 'lease_expired' | 'unknown_receivers' | 'failed'

export interface PublisherOptions {
  registry: Registry
  codec: MessageCodec
  nodeId: string
  writerWaitMs: number
  youthMs: number
  publishTimeoutMs: number
  /**
   * Redis Sentinel (sentinel-watch.ts `confirm`): the time since which a majority of
   * sentinels has named the server at `address` the primary, once a majority asked after
   * `after` named it; undefined when they did not. Absent with one Redis server.
   */
  confirmPrimary?: (address: string, after: number, timeoutMs: number) => Promise<number | undefined>
  now: () => number
  /** a publish attempt failed and will be retried (logged once per publish) */
  onRetry(error: Error): void
  onOutcome(outcome: PublishOutcome, latencyMs: number, missing: string[]): void
}

/** What the publisher saw of one change: its id, the nodes registered when it went out, and each acknowledgement. */
export interface Published {
  changeId: string
  outcome: PublishOutcome
  /** every node registered when the message went out, the publisher among them */
  nodes: string[]
  /** per node that acknowledged: ms after the publish began, and the sessions it ended */
  acks: Map<string, { afterMs: number; ended: number | undefined }>
}

export interface Publisher {
  /** Resolves once the change is acknowledged everywhere or waited out (see above); rejects when it could not be confirmed. */
  publish(row: RowChanged): Promise<Published>
  /** Resolves once every publish in flight has settled. */
  drain(): Promise<void>
  /** An authenticated ack arrived on our ack channel. */
  acked(ack: AckMessage): void
  close(): void
}

interface Pending {
  readonly startedAt: number
  readonly acked: Map<string, { afterMs: number; ended: number | undefined }>
  onAck: (() => void) | undefined
}

export function createPublisher(options: PublisherOptions): Publisher {
  const { registry, codec, nodeId, now } = options
  const pending = new Map<string, Pending>()
  const inFlight = new Set<Promise<unknown>>()
  let counter = 0
  let closed = false

  async function publishOnce(payload: string, deadline: number): Promise<PublishReply> {
    for (let attempt = 0; ; attempt++) {
      if (closed) throw new StoreUnavailableError('invalidation bus closed')
      const remaining = deadline - now()
      if (remaining <= 0) throw new StoreUnavailableError('invalidation channel unavailable: publish not confirmed')
      try {
        return await withTimeout(registry.publish(payload), remaining)
      } catch (error) {
        if (attempt === 0) options.onRetry(error as Error)
        await sleep(Math.min(50, Math.max(0, deadline - now())))
      }
    }
  }

  function waitForAcks(entry: Pending, waitFor: string[], deadline: number): Promise<boolean> {
    const complete = () => waitFor.every((node) => entry.acked.has(node))
    if (complete()) return Promise.resolve(true)
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        entry.onAck = undefined
        resolve(complete())
      }, Math.max(0, deadline - now()))
      entry.onAck = () => {
        if (!complete()) return
        clearTimeout(timer)
        entry.onAck = undefined
        resolve(true)
      }
    })
  }

  /** With Sentinel: see `confirmPrimary`; with one Redis server there is nothing to confirm. */
  async function confirmPrimary(reply: PublishReply, repliedAt: number, startedAt: number): Promise<number | undefined> {
    if (!options.confirmPrimary) return Number.NEGATIVE_INFINITY
    if (reply.address === undefined) return undefined
    return options.confirmPrimary(reply.address, repliedAt, Math.max(options.writerWaitMs, startedAt + options.publishTimeoutMs - now()))
  }

  async function publish(row: RowChanged): Promise<Published> {
    const startedAt = now()
    const id = `${nodeId}.${++counter}`
    const payload = codec.change({ id, from: nodeId, row })
    const entry: Pending = { startedAt, acked: new Map(), onAck: undefined }
    pending.set(id, entry)
    try {
      let reply: PublishReply
      try {
        reply = await publishOnce(payload, startedAt + options.publishTimeoutMs)
      } catch (error) {
        options.onOutcome('failed', now() - startedAt, [])
        throw error instanceof StoreUnavailableError ? error : new StoreUnavailableError('invalidation channel unavailable', { cause: error })
      }
      const repliedAt = now()
      const waitFor = reply.nodes.filter((node) => node !== nodeId)
      const outcome = await traced(acknowledgementWait, () => ({ nodes: waitFor.length }), (trace) => settle(entry, reply, waitFor, repliedAt, startedAt, trace))
      return { changeId: id, outcome, nodes: reply.nodes, acks: new Map(entry.acked) }
    } finally {
      pending.delete(id)
    }
  }

  /** Waits for the acknowledgements of `waitFor` (and whatever else must be waited out), then reports the outcome. */
  async function settle(entry: Pending, reply: PublishReply, waitFor: string[], repliedAt: number, startedAt: number, trace: AcknowledgementWait | undefined): Promise<PublishOutcome> {
    // Every receiver must be accounted for: a subscriber Redis counted that is not in
    // the registry (its entry removed by someone, or not made yet) is waited out.
    const unknownReceivers = reply.receivers > waitFor.length + 1
    const leaseDeadline = repliedAt + options.writerWaitMs
    const youthDeadline = reply.instanceAgeMs < options.youthMs ? repliedAt + (options.youthMs - reply.instanceAgeMs) : 0
    const [allAcked, primarySince] = await Promise.all([waitForAcks(entry, waitFor, leaseDeadline), confirmPrimary(reply, repliedAt, startedAt)])
    if (primarySince === undefined) {
      options.onOutcome('failed', now() - startedAt, [])
      if (trace) trace.outcome = 'failed'
      throw new StoreUnavailableError('invalidation channel unavailable: the server that took the publish is not the primary the sentinels name')
    }
    // Nodes still on a previous primary stop trusting within a lease of the majority naming this one.
    const primaryDeadline = primarySince + options.writerWaitMs
    const deadline = Math.max(youthDeadline, unknownReceivers ? leaseDeadline : 0, primaryDeadline)
    if (now() < deadline) await sleep(deadline - now())
    const outcome = !allAcked ? 'lease_expired' : unknownReceivers ? 'unknown_receivers' : 'acked'
    const missing = allAcked ? [] : waitFor.filter((n) => !entry.acked.has(n))
    options.onOutcome(outcome, now() - startedAt, missing)
    if (trace) Object.assign(trace, { outcome, missing: missing.length })
    return outcome
  }

  return {
    publish(row) {
      const promise = publish(row)
      inFlight.add(promise)
      const forget = () => inFlight.delete(promise)
      promise.then(forget, forget)
      return promise
    },
    async drain() {
      await Promise.allSettled([...inFlight])
    },
    acked(ack) {
      const entry = pending.get(ack.id)
      if (!entry || entry.acked.has(ack.node)) return
      entry.acked.set(ack.node, { afterMs: Math.round(now() - entry.startedAt), ended: ack.ended })
      entry.onAck?.()
    },
    close() {
      closed = true
    },
  }
}

export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out after ${Math.round(ms)} ms`)), ms)
    promise.then(
      (value) => {
        clearTimeout(timer)
        resolve(value)
      },
      (error) => {
        clearTimeout(timer)
        reject(error)
      },
    )
  })
}
