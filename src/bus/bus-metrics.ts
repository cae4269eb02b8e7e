import type { Metrics } from '../metrics.js'
import type { Rejection } from './messages/messages.js'
import type { PublishOutcome } from './publishing/publisher.js'

/** The bus's series on /metrics; the hot path only bumps a counter. */
export interface BusMetrics {
  epoch(reason: string): void
  reconnect(reason: string): void
  message(kind: 'change' | 'ack' | 'replayed'): void
  rejected(kind: 'change' | 'ack', reason: Rejection): void
  error(operation: 'register' | 'registration_lost' | 'ack_publish' | 'publish_retry' | 'connection' | 'handler' | 'sentinel'): void
  published(outcome: PublishOutcome, latencyMs: number): void
}

/** What the gauges read at scrape time. */
export interface BusState {
  subscribed(): boolean
  registered(): boolean
  trusted(): boolean
  epoch(): number
}

export function createBusMetrics(metrics: Metrics, state: BusState): BusMetrics {
  const epoch = metrics.counter('chat_auth_bus_epoch_changes_total', 'Cache epochs started (all caches flushed), by reason', ['reason'])
  const reconnect = metrics.counter('chat_auth_bus_reconnects_total', 'Subscriber connections lost (a new one follows), by reason', ['reason'])
  const message = metrics.counter('chat_auth_bus_messages_total', 'Authenticated messages received, by kind (change, ack, replayed)', ['kind'])
  const rejected = metrics.counter(
    'chat_auth_bus_rejected_messages_total',
    'Messages refused (changed nothing, not acknowledged), by kind and reason: malformed, unknown_key (no key of ours), bad_mac (forged or tampered)',
    ['kind', 'reason'],
  )
  const error = metrics.counter('chat_auth_bus_errors_total', 'Failures on the bus, by operation (register, registration_lost, ack_publish, publish_retry, connection, handler, sentinel)', ['operation'])
  const published = metrics.counter(
    'chat_auth_bus_publishes_total',
    'Changes published, by outcome: acked (every registered node acknowledged), lease_expired (waited out the lease of a node that did not), unknown_receivers (a subscriber outside the registry: waited out the lease), failed (Redis could not confirm: the write answered 503)',
    ['outcome'],
  )
  for (const reason of ['malformed', 'unknown_key', 'bad_mac'] satisfies Rejection[]) rejected({ kind: 'change', reason }, 0)
  metrics.collect('chat_auth_bus_subscribed', '1 while the subscription to the invalidation channel is confirmed', 'gauge', () => (state.subscribed() ? 1 : 0))
  metrics.collect('chat_auth_bus_registered', '1 while this node is certainly in the node registry', 'gauge', () => (state.registered() ? 1 : 0))
  metrics.collect('chat_auth_bus_trusted', '1 while the channel is proven alive (lease held) and caches may be served', 'gauge', () => (state.trusted() ? 1 : 0))
  metrics.collect('chat_auth_bus_epoch', 'Current cache epoch of this node', 'gauge', () => state.epoch())
  // A histogram, not per-node quantiles: buckets add up across nodes.
  const ackLatency = metrics.histogram(
    'chat_auth_bus_ack_latency_seconds',
    'Time from publish to every registered node acknowledging (or the lease running out)',
  )
  return {
    epoch: (reason) => epoch({ reason }),
    reconnect: (reason) => reconnect({ reason }),
    message: (kind) => message({ kind }),
    rejected: (kind, reason) => rejected({ kind, reason }),
    error: (operation) => error({ operation }),
    published(outcome, latencyMs) {
      published({ outcome })
      if (outcome !== 'failed') ackLatency(latencyMs / 1000)
    },
  }
}
