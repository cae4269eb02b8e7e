import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { Store } from '../store/store.js'
import { createWebhookWorker, type WebhookWorker } from '../webhooks/worker.js'
import { destinationPolicy, type Destinations } from '../webhooks/destinations.js'
import type { OnClose } from './lifecycle.js'

/**
 * The webhook sender (SPEC §9.3, webhooks/): every change this node learns of — its own
 * writes and, over Redis, every other node's — wakes it (change-pipeline.ts; at once, or
 * with the others of the same 50 ms: webhooks/worker.ts); its own poll finds the
 * rest (events of writes that publish nothing, retries falling due). Closed before the
 * store: attempts in flight are cut short and their leases given back. Its destinations
 * (WEBHOOK_ALLOW_PRIVATE_NETWORKS) are the ones the admin API checks a new webhook against.
 */
export function openWebhooks(
  onClose: OnClose,
  config: Config,
  parts: { store: Store; metrics: Metrics; logger: Logger },
): { worker: WebhookWorker; destinations: Destinations } {
  const destinations = destinationPolicy(config.webhookPrivateNetworks)
  const attempts = parts.metrics.counter('chat_auth_webhook_attempts_total', 'Webhook delivery attempts made by this node, by outcome', ['outcome'])
  const labels = { delivered: { outcome: 'delivered' }, failed: { outcome: 'failed' } }
  const worker = createWebhookWorker({
    store: parts.store,
    logger: parts.logger,
    retryBaseMs: config.webhookRetryBaseMs,
    destinations,
    slotsPerCompany: config.webhookSlotsPerCompany,
    onAttempt: (outcome) => attempts(labels[outcome]),
  })
  onClose(() => worker.stop())
  return { worker, destinations }
}
