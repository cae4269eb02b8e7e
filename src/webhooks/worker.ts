import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { LeasedEndpoint, Store } from '../store/store.js'
import { ATTEMPT_TIMEOUT_MS, sendAttempt } from './send.js'
import type { Destinations } from './destinations.js'
import { retryDelayMs, RETRY_FOR_MS } from './schedule.js'
import { throttledLog } from '../throttled-log.js'

type WebhookQueue = Pick<Store, 'claimEndpoints' | 'dueDeliveries' | 'recordAttempt' | 'releaseEndpoint'>

export interface WebhookWorkerOptions {
  store: WebhookQueue
  logger: Logger
  /** WEBHOOK_RETRY_BASE_MS: the wait after the first failed attempt, doubled after each */
  retryBaseMs: number
  /** how often the queue is read without a nudge: other nodes' events, retries falling due */
  pollMs?: number
  /**
   * Nudges closer together than this share one read of the queue (default 50 ms): the first
   * reads it at once, the others once at the end of the interval. Every change a node learns
   * of nudges it, with or without a webhook anywhere; at a few hundred changes a second, one
   * read each was a query per change per node (bench/RESULTS.md).
   */
  nudgeIntervalMs?: number
  /** where attempts may go (SPEC §9.3: public addresses, and what WEBHOOK_ALLOW_PRIVATE_NETWORKS adds) */
  destinations: Destinations
  /** endpoints sent to at once by this node (default 32): an endpoint that hangs holds one for 5 s per attempt */
  concurrency?: number
  /** of those, how many one company's endpoints may hold at once (WEBHOOK_SLOTS_PER_COMPANY, default 4) */
  slotsPerCompany?: number
  /** per attempt (5 s: SPEC §9.3); tests only */
  timeoutMs?: number
  /** counts attempts by outcome */
  onAttempt?: (outcome: 'delivered' | 'failed') => void
}

export interface WebhookWorker {
  /** A write may have queued deliveries: read the queue soon (at once, or at most nudgeIntervalMs from now). Cheap; coalesced. */
  nudge(): void
  /** Stops taking work, cuts attempts in flight short (they are made again), gives the leases back. */
  stop(): Promise<void>
}

const DELIVERIES_PER_TURN = 50

/**
 * The background sender (SPEC §9.3). Each node runs one; they share the queue in the store.
 * It takes endpoints, not deliveries: the lease of an endpoint (`claimEndpoints`) makes this
 * node the only one sending to it, so each attempt is made by one node and an endpoint's
 * deliveries go one at a time, in event order. The lease lasts twice an attempt's timeout and
 * is renewed with each attempt recorded; a node that dies holding one delays that endpoint by
 * at most the lease, and the attempt it had in flight is made again (a duplicate, if the
 * receiver had taken it). A write never waits for any of this: it only inserted rows.
 *
 * One company never slows another (SPEC §7.3): its endpoints hold at most `slotsPerCompany`
 * of the node's slots, the claim takes companies in turn, and an endpoint whose attempt got
 * no answer (a timeout, a failed connection) ends its turn and is paused as a whole for the
 * retry wait, so that its queued events do not each hold a slot for a timeout of their own.
 * An answer, even a 500, shows the endpoint alive: its turn goes on with the next event.
 */
export function createWebhookWorker(options: WebhookWorkerOptions): WebhookWorker {
  const { store, retryBaseMs } = options
  const log = options.logger.child({ component: 'webhooks' })
  const owner = randomUUID()
  const timeoutMs = options.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  const leaseMs = timeoutMs * 2
  const concurrency = options.concurrency ?? 32
  const slotsPerCompany = options.slotsPerCompany ?? 4
  const { destinations } = options
  const nudgeIntervalMs = options.nudgeIntervalMs ?? 50
  const stopping = new AbortController()
  const active = new Set<Promise<void>>()
  let claiming: Promise<void> | undefined
  let again = false
  let lastNudgedClaim = -Infinity
  let trailingNudge: NodeJS.Timeout | undefined
  // A store that cannot answer fails every turn, an endpoint that is down every attempt: one line per 5 s of each.
  const throttled = throttledLog(log, Date.now)
  const failed = (what: string, error: unknown) => throttled(`${what} failed; the next turn retries`, { err: error instanceof Error ? error.message : String(error) })

  async function sendTo(endpoint: LeasedEndpoint): Promise<void> {
    let full = false
    try {
      const due = await store.dueDeliveries(endpoint.id, DELIVERIES_PER_TURN)
      full = due.length === DELIVERIES_PER_TURN
      for (const delivery of due) {
        if (stopping.signal.aborted) return
        const attempt = await sendAttempt(endpoint, delivery, { stop: stopping.signal, destinations, timeoutMs })
        // Cut short by the close: not an attempt; the delivery stays due for whoever comes next.
        if (attempt.interrupted) return
        options.onAttempt?.(attempt.delivered ? 'delivered' : 'failed')
        const attempts = delivery.attempts + 1
        // The URL is not logged (it may carry a token of the receiver's); the id names the endpoint.
        if (!attempt.delivered) throttled(`webhook ${endpoint.id}: attempts failing`, { webhookId: endpoint.id, eventId: delivery.eventId, attempt: attempts, status: attempt.status, error: attempt.error })
        const answered = attempt.status !== null
        const outcome = {
          delivered: attempt.delivered,
          status: attempt.status,
          error: attempt.error,
          retryInMs: retryDelayMs(retryBaseMs, attempts),
          retryForMs: RETRY_FOR_MS,
          pauseEndpointMs: answered ? null : retryDelayMs(retryBaseMs, endpoint.unanswered + 1),
        }
        const stillMine = await store.recordAttempt(owner, endpoint.id, delivery.id, outcome, leaseMs)
        if (!stillMine || !answered) {
          full = false
          return
        }
      }
    } catch (error) {
      failed('sending webhooks', error)
    } finally {
      await store.releaseEndpoint(owner, endpoint.id).catch((error: unknown) => failed('giving a webhook lease back', error))
      if (full) again = true
    }
  }

  /** Claims endpoints while there is room and work; each is sent to on its own. */
  async function claim(): Promise<void> {
    do {
      again = false
      const room = concurrency - active.size
      if (room <= 0 || stopping.signal.aborted) return
      let endpoints
      try {
        endpoints = await store.claimEndpoints(owner, leaseMs, room, slotsPerCompany)
      } catch (error) {
        failed('reading the webhook queue', error)
        return
      }
      for (const endpoint of endpoints) {
        const task: Promise<void> = sendTo(endpoint).finally(() => {
          active.delete(task)
          // Room again: more may be due (a full turn, or endpoints skipped for lack of room).
          claimNow()
        })
        active.add(task)
      }
      if (endpoints.length === room) again = true
    } while (again)
  }

  /** Reads the queue now, or once more after the read in flight. */
  function claimNow(): void {
    if (stopping.signal.aborted) return
    if (claiming !== undefined) {
      again = true
      return
    }
    claiming = claim().finally(() => {
      claiming = undefined
    })
  }

  /** A nudge from outside: at once when none came for nudgeIntervalMs, else at the end of that interval (one for all of them). */
  function nudge(): void {
    if (stopping.signal.aborted || trailingNudge !== undefined) return
    const wait = lastNudgedClaim + nudgeIntervalMs - performance.now()
    if (wait <= 0) return claimNudged()
    trailingNudge = setTimeout(() => {
      trailingNudge = undefined
      claimNudged()
    }, wait)
    trailingNudge.unref()
  }

  function claimNudged(): void {
    lastNudgedClaim = performance.now()
    claimNow()
  }

  const poll = setInterval(nudge, options.pollMs ?? 1000)
  poll.unref()
  nudge()

  return {
    nudge,
    async stop() {
      clearInterval(poll)
      clearTimeout(trailingNudge)
      stopping.abort()
      await claiming
      await Promise.all([...active])
    },
  }
}
