import type { Change } from '../domain.js'
import type { BusHealth, InvalidationBus } from './bus.js'

/**
 * One node, one process: a change is applied to the caches synchronously, before
 * `publish` resolves. Nothing can be lost, so the cache is always trusted.
 */
export function createMemoryBus(): InvalidationBus {
  const changeHandlers: Array<(change: Change) => void> = []
  return {
    async start() {},
    async publish(change) {
      for (const handler of changeHandlers) handler(change)
    },
    onChange(handler) {
      changeHandlers.push(handler)
    },
    onEpochChange() {},
    trusted: () => true,
    health: (): BusHealth => ({ ready: true, trusted: true, epoch: 0 }),
    async close() {},
  }
}
