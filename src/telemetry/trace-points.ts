import { SpanStatusCode, trace, type Span } from '@opentelemetry/api'
import { acknowledgementWait, type AcknowledgementWait } from '../trace-points.js'

const tracer = trace.getTracer('chat-auth')

/** The span of each step, kept on the step's own context object while it runs. */
const spans = new WeakMap<object, Span>()

/**
 * Each traced step of the node (../trace-points.ts) as a span. A step's start is published
 * inside the caller's async context, so the span's parent is the active span there: the
 * request that made the change.
 */
export function subscribeTracePoints(): () => void {
  const handlers = {
    start(step: AcknowledgementWait) {
      spans.set(step, tracer.startSpan('wait for acknowledgements', { attributes: { 'chat_auth.ack.nodes': step.nodes } }))
    },
    end() {},
    asyncStart() {},
    asyncEnd(step: AcknowledgementWait) {
      const span = spans.get(step)
      if (span === undefined) return
      spans.delete(step)
      if (step.outcome !== undefined) span.setAttribute('chat_auth.ack.outcome', step.outcome)
      if (step.missing !== undefined) span.setAttribute('chat_auth.ack.missing', step.missing)
      span.end()
    },
    error(step: AcknowledgementWait & { error?: unknown }) {
      const span = spans.get(step)
      if (span === undefined) return
      span.recordException(step.error instanceof Error ? step.error : String(step.error))
      span.setStatus({ code: SpanStatusCode.ERROR, message: step.error instanceof Error ? step.error.message : String(step.error) })
    },
  }
  acknowledgementWait.subscribe(handlers)
  return () => void acknowledgementWait.unsubscribe(handlers)
}
