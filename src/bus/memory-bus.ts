import type { Change } from '../domain.js'
import type { BusHealth, ChangeHandler, InvalidationBus } from './bus.js'

/**
 * One node, one process: a change is applied to the caches synchronously, before
 * `publish` resolves. Nothing can be lost, so the cache is always trusted.
 */
export function createMemoryBus(): InvalidationBus {
  const changeHandlers: ChangeHandler[] = []
  return {
    async start() {},
    async publish(change: Change) {
      const pending: Array<void | Promise<void>> = []
      for (const handler of changeHandlers) pending.push(handler(change))
      await Promise.all(pending)
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
