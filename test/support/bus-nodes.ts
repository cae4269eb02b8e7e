import { pino } from 'pino'
import { createRedisBus, type RedisBus, type RedisBusOptions } from '../../src/bus/redis-bus.js'
import type { Change, RowChanged } from '../../src/domain.js'
import { Metrics } from '../../src/metrics.js'
import { waitFor } from './poll.js'

/** One bus of a test, with what it received: every change, and how many epochs it started. */
export interface BusNode {
  bus: RedisBus
  metrics: Metrics
  changes: Array<Change | RowChanged>
  epochs: number
}

/**
 * Redis buses for a test file: each `start` makes one on the file's defaults (prefix, keys,
 * lease) with its own metrics, records what it receives, and `closeAll` closes every one.
 */
export function busNodes(defaults: Omit<RedisBusOptions, 'logger' | 'metrics'> & { logger?: RedisBusOptions['logger'] }) {
  const nodes: BusNode[] = []
  return {
    nodes,
    start(options: Partial<Omit<RedisBusOptions, 'metrics'>> = {}): BusNode {
      const metrics = new Metrics()
      const bus = createRedisBus({ logger: pino({ level: 'silent' }), ...defaults, ...options, metrics })
      const node: BusNode = { bus, metrics, changes: [], epochs: 0 }
      bus.onChange((change) => void node.changes.push(change))
      bus.onEpochChange(() => node.epochs++)
      nodes.push(node)
      return node
    },
    async closeAll(): Promise<void> {
      await Promise.allSettled(nodes.map((n) => n.bus.close()))
    },
  }
}

/** A user change with a revision above every one made before (by this function's caller). */
export function userChanges(): (id?: string) => Change {
  let revision = 0
  return (id = 'u1') => {
    revision++
    return { kind: 'user', state: { id, companyId: 'c', externalId: 'e', agentId: 'a', tokenVersion: revision, active: true, revision } }
  }
}

/** Waits for a state, polling often (bus tests wait for tens of milliseconds, not seconds). */
export const until = (timeoutMs: number, everyMs: number) => (what: string, predicate: () => boolean | Promise<boolean>, ms = timeoutMs) =>
  waitFor(what, predicate, { timeoutMs: ms, everyMs })
