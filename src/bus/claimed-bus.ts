import { StoreUnavailableError } from '../errors.js'
import type { BusHealth, InvalidationBus } from './bus.js'

/** What the bus needs of a node's claim on its database (store/database-claim.ts). */
export interface Claim {
  /** cheap enough for every request */
  held(): boolean
  /** called after the claim was lost and taken again, before the node trusts its cache again */
  onRegained(handler: () => void): void
}

/**
 * The bus as the caches see it: trusted only while the bus vouches for them AND the claim is
 * held; a regained claim is a new epoch; a publish confirms only while the claim is held (a
 * node that may share the database unseen cannot promise every node has the change).
 */
export function claimedBus(bus: InvalidationBus, claim: Claim): InvalidationBus {
  return {
    nodeId: bus.nodeId,
    start: () => bus.start(),
    async publish(change) {
      const receipt = await bus.publish(change)
      if (!claim.held()) throw new StoreUnavailableError('the claim on the database is lost: the change cannot be confirmed on every node')
      return receipt
    },
    onChange: (handler) => bus.onChange(handler),
    onEpochChange(handler) {
      bus.onEpochChange(handler)
      claim.onRegained(handler)
    },
    trusted: () => claim.held() && bus.trusted(),
    board: bus.board,
    health(): BusHealth {
      const health = bus.health()
      return { ...health, trusted: health.trusted && claim.held() }
    },
    close: () => bus.close(),
  }
}
