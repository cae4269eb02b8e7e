import { tracingChannel } from 'node:diagnostics_channel'

/**
 * The steps of a node worth a span of their own, beyond what the instrumented libraries
 * (Fastify, pg, ioredis) show, as Node's diagnostics channels. With OpenTelemetry on,
 * telemetry/ subscribes and turns each traced step into a span under the request that ran
 * it; with it off nothing subscribes, and a traced step is a plain call: no OpenTelemetry
 * code is loaded, no context object is made.
 */

/** What a span of the acknowledgement wait says: the nodes waited for, then how it ended. */
export interface AcknowledgementWait {
  /** the other nodes registered when the change went out */
  nodes: number
  /** set as the wait ends (publisher.ts `PublishOutcome`) */
  outcome?: string
  /** the nodes that had not acknowledged when the wait ended */
  missing?: number
}

/** Publish with acknowledgements (bus/publishing/publisher.ts): from the PUBLISH's reply until every node acknowledged, or the wait ran out. */
export const acknowledgementWait = tracingChannel<unknown, AcknowledgementWait>('chat-auth:acknowledgement-wait')

/** `step()`, inside the channel's trace when someone subscribes to it; a plain call otherwise. */
export function traced<T, C extends object>(channel: ReturnType<typeof tracingChannel<unknown, C>>, context: () => C, step: (context: C | undefined) => Promise<T>): Promise<T> {
  if (!channel.hasSubscribers) return step(undefined)
  const made = context()
  return channel.tracePromise(() => step(made), made)
}
