import type { Logger } from 'pino'
import type { Change } from '../domain.js'
import type { BusHealth, InvalidationBus } from './bus.js'
import { createListeners } from './listeners.js'

/**
 * One node, one process: a change is applied synchronously, before `publish` resolves (and
 * after whatever its handler's promise holds). Nothing can be lost, so the cache is always
 * trusted; a handler that fails starts a new epoch, as on the Redis bus, and the publish
 * rejects (the write answers 503: its change is committed, and applied once the epoch's
 * flush has run).
 */
export function createMemoryBus(options: { logger?: Pick<Logger, 'error'> } = {}): InvalidationBus {
  const listeners = createListeners(NO_COUNTS, options.logger ?? SILENT)
  return {
    async start() {},
    async publish(change: Change) {
      await listeners.deliver(change)
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
