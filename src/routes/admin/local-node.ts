import type { BusHealth } from '../../bus/bus.js'
import type { ClockWatch } from '../../clock/offset.js'
import type { NodesView, NodeViewBody } from './nodes.js'

/** What this node knows of itself, for the listing. */
export interface LocalNodeParts {
  nodeId: string
  version: string
  bus: { health(): BusHealth }
  sessions: { readonly size: number; count(scope: 'company' | 'agent', id: string): number }
  eventStreams: { size(): number }
  clock: Pick<ClockWatch, 'reading'>
  cachedUsers(): { users: number; bytes: number }
  ready(): boolean
}

/**
 * SPEC §10.2 until the nodes' board lands (the bus's work): this node alone, and its own open
 * sessions. Over Redis the listing then names one node and the preview counts one node's
 * sessions; the board's `gateway.nodes` replaces this.
 */
export function localNodes(parts: LocalNodeParts): NodesView {
  const startedAt = new Date().toISOString()
  let untrustedSince: string | null = null
  return {
    async list(): Promise<NodeViewBody[]> {
      const health = parts.bus.health()
      if (health.trusted) untrustedSince = null
      else untrustedSince ??= new Date().toISOString()
      const reading = parts.clock.reading()
      return [
        {
          nodeId: parts.nodeId,
          version: parts.version,
          startedAt,
          ready: parts.ready(),
          trusted: health.trusted,
          untrustedSince,
          lastChangeAt: null,
          changeLogReadAt: null,
          behind: { changes: 0, ms: 0 },
          cache: parts.cachedUsers(),
          sessions: parts.sessions.size,
          eventStreams: parts.eventStreams.size(),
          clockOffsetMs: reading === undefined ? null : Math.round(reading.offsetMs),
          redis: null,
        },
      ]
    },
    async openSessions(scope, id) {
      return parts.sessions.count(scope, id)
    },
  }
}
