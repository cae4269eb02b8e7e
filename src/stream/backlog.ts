import type { CommittedEvent, EventsRead } from '../store/store.js'
import type { Position } from './cursor.js'

export interface EventsAfter {
  /** events the position had not seen may have been pruned: the caller resets instead */
  pruned: boolean
  /** oldest first, each with the position a client holds once it has it; at most the limit */
  events: Array<{ event: CommittedEvent; position: Position }>
  /** the position after all of them: the bound given, or the last read's own snapshot */
  end: string
  /** every event up to `end` is in `events` (false: the limit cut them; go on from the last one's position) */
  complete: boolean
}

type EventsSince = (companyIds: string[], after: string, upTo?: string, aboveId?: string, limit?: number) => Promise<EventsRead>

/**
 * A company's events that a client at `from` has not seen (stream/cursor.ts), committed up to
 * the snapshot `upTo` (undefined: up to now): first the rest of the read the client was in
 * (what that read's snapshot saw past the client's id), then every event committed after it;
 * at most `limit` of them, so that a cursor weeks old costs one page of memory at a time, not
 * weeks of events. Shared by the stream's resume and the listing's `after`.
 */
export async function eventsAfter(eventsSince: EventsSince, companyId: string, from: Position, upTo: string | undefined, limit: number): Promise<EventsAfter> {
  const rest = from.upTo === undefined ? undefined : await eventsSince([companyId], from.base, from.upTo, from.id, limit)
  const events = (rest?.events ?? []).map((event) => ({ event, position: { base: from.base, upTo: from.upTo!, id: event.id } }))
  const after = from.upTo ?? from.base
  if (rest !== undefined && events.length >= limit) {
    // the read the client was in is not done: the next page goes on inside it
    return { pruned: rest.pruned, events, end: upTo ?? rest.snapshot, complete: false }
  }
  const next = await eventsSince([companyId], after, upTo, undefined, limit - events.length)
  const end = upTo ?? next.snapshot
  events.push(...next.events.map((event) => ({ event, position: { base: after, upTo: end, id: event.id } })))
  return { pruned: (rest?.pruned ?? false) || next.pruned, events, end, complete: events.length < limit }
}
