import type { Applied, Receipt } from '../bus.js'
import type { Published } from './publisher.js'

/** SPEC §10.2's receipt: the publisher's view of the other nodes, and this node's own handling of its change. */
export function receiptOf(published: Published, self: string, local: { result: Applied; afterMs: number }): Receipt {
  return {
    changeId: published.changeId,
    outcome: published.outcome === 'acked' ? 'acknowledged' : 'lease_expired',
    nodes: published.nodes.map((nodeId) => {
      if (nodeId === self) return { nodeId, ackedAfterMs: local.afterMs, sessionsEnded: local.result.sessionsEnded }
      const ack = published.acks.get(nodeId)
      return { nodeId, ackedAfterMs: ack?.afterMs ?? null, sessionsEnded: ack === undefined ? null : (ack.ended ?? null) }
    }),
  }
}
