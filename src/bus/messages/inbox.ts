import { LRUCache } from 'lru-cache'
import type { RowChanged } from '../../domain.js'
import type { Applied } from '../bus.js'
import type { BusMetrics } from '../bus-metrics.js'
import type { AckMessage, MessageCodec, Rejection } from './messages.js'

/**
 * What a node does with what arrives on its channels. An authenticated change is applied
 * (an eviction) and acknowledged to its writer; a replay of one changes nothing; an
 * authenticated ack goes to the publisher. Anything else is refused, counted and logged —
 * and a refused change flushes the caches: it may be a real change of a node whose keys
 * we lack, which we will not acknowledge, so we must not go on trusting what it made stale.
 */
export interface InboxOptions {
  codec: MessageCodec
  nodeId: string
  count: BusMetrics
  warn(what: string, fields: Record<string, unknown>): void
  /** a promise holds the acknowledgement until it settles; none is sent if it rejects */
  apply(row: RowChanged): Applied | Promise<Applied>
  flush(reason: string): void
  sendAck(writer: string, payload: string): Promise<unknown>
  acked(ack: AckMessage): void
}

export interface Inbox {
  change(payload: string): void
  ack(payload: string): void
}

/** ids of applied messages remembered, so that a replay within this window changes nothing */
const SEEN_MESSAGES = 65_536

export function createInbox(options: InboxOptions): Inbox {
  const { codec, nodeId, count } = options
  const seen = new LRUCache<string, true>({ max: SEEN_MESSAGES })

  function reject(kind: 'change' | 'ack', reason: Rejection): void {
    count.rejected(kind, reason)
    options.warn(`rejected ${kind} message${kind === 'change' ? '; caches flushed' : ''}`, { reason })
    if (kind === 'change') options.flush(`rejected_${reason}`)
  }

  return {
    change(payload) {
      const read = codec.readChange(payload)
      if (!read.ok) return reject('change', read.reason)
      const { id, from, row } = read.message
      if (seen.has(id)) return count.message('replayed')
      seen.set(id, true)
      count.message('change')
      if (from === nodeId) return // applied before it was published
      const ack = ({ sessionsEnded }: Applied) =>
        void options.sendAck(from, codec.ack({ id, node: nodeId, ended: sessionsEnded })).catch((error: Error) => {
          count.error('ack_publish')
          options.warn('acknowledgement not published (the writer waits out our lease)', { err: error.message })
        })
      const applied = options.apply(row)
      // A change not applied is not acknowledged: its writer waits out our lease.
      if (applied instanceof Promise) applied.then(ack, () => undefined)
      else ack(applied)
    },
    ack(payload) {
      const read = codec.readAck(payload)
      if (!read.ok) return reject('ack', read.reason)
      count.message('ack')
      options.acked(read.message)
    },
  }
}
