import type { Logger } from 'pino'
import type { Change } from '../domain.js'
import { performance } from 'node:perf_hooks'
import type { BusHealth, InvalidationBus, Receipt } from './bus.js'
import { createListeners } from './listeners.js'

/**
 * One node, one process: a change is applied synchronously, before `publish` resolves (and
 * after whatever its handler's promise holds). Nothing can be lost, so the cache is always
 * trusted; a handler that fails starts a new epoch, as on the Redis bus, and the publish
 * rejects (the write answers 503: its change is committed, and applied once the epoch's
 * flush has run).
 */
export function createMemoryBus(options: { logger?: Pick<Logger, 'error'>; nodeId?: string } = {}): InvalidationBus {
  const listeners = createListeners(NO_COUNTS, options.logger ?? SILENT)
  const nodeId = options.nodeId ?? 'embedded'
  let published = 0
  return {
    nodeId,
    async start() {},
    async publish(change: Change): Promise<Receipt> {
      const startedAt = performance.now()
      const { sessionsEnded } = await listeners.deliver(change)
      const ackedAfterMs = Math.round(performance.now() - startedAt)
      return { changeId: `${nodeId}.${++published}`, outcome: 'embedded', nodes: [{ nodeId, ackedAfterMs, sessionsEnded }] }
    },
    onChange: listeners.onChange,
    onEpochChange: listeners.onEpochChange,
    trusted: () => true,
    health: (): BusHealth => ({ ready: true, trusted: true, epoch: listeners.epoch() }),
    async close() {},
  }
}

/** One node has no bus series of its own on /metrics. */
const NO_COUNTS = { epoch() {}, error() {} }
const SILENT = { error() {} }
