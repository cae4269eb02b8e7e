import type { FastifyReply } from 'fastify'
import type { Metrics } from '../metrics.js'
import { errors } from '../errors.js'
import { throttledLog, type LevelLogger } from '../throttled-log.js'
import { body } from './error-handler.js'

/** Notes one verification that could not be decided (the store away, say). */
export type ReportUndecided = (error: unknown, reqId: string) => void

// One counter per registry: the app's verify route and an in-process plugin over the same
// gateway share it (prom-client refuses a second counter of one name).
const counters = new WeakMap<Metrics, () => void>()

function undecidedCounter(metrics: Metrics): () => void {
  let count = counters.get(metrics)
  if (count === undefined) {
    const counter = metrics.counter('chat_auth_verify_unavailable_total', 'Verifications answered 503: the store could not answer (the cause is logged once per 5 s)')
    count = () => counter()
    counters.set(metrics, count)
  }
  return count
}

/**
 * During an outage every verification fails alike: its cause (with the stack) is logged
 * once per interval, and every one is counted, so a flood of 503s is not a flood of logs.
 */
export function undecidedReporter(log: LevelLogger, metrics?: Metrics, now: () => number = Date.now): ReportUndecided {
  const logOnce = throttledLog(log, now, 'error')
  const count = metrics === undefined ? () => {} : undecidedCounter(metrics)
  return (error, reqId) => {
    count()
    logOnce('verification could not be decided (repeats are counted in chat_auth_verify_unavailable_total)', { reqId, err: error })
  }
}

/** Whatever went wrong, the verifier cannot decide: 503, never an allow, never a 500. */
export function answerUndecided(reply: FastifyReply): FastifyReply {
  return reply.code(503).header('retry-after', '1').send(body(errors.unavailable()))
}
