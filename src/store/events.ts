import type { Actor } from '../domain.js'
import type { Db } from './db.js'
import { all, count, type BigintColumn } from './query.js'

/**
 * The audit trail (SPEC §7.2, migrations/005_events.sql). An event is written by the very
 * statement of its change, through `record_change()` or `record_event()`
 * (migrations/007_record_change.sql), never on its own: here it is only read and pruned.
 */
export interface EventRecord {
  id: string
  type: string
  at: Date
  actor: Record<string, unknown>
  subject: Record<string, unknown>
  detail: Record<string, unknown>
}

interface EventRow {
  id: BigintColumn
  type: string
  at: Date
  actor: unknown
  subject: unknown
  detail: unknown
}

// jsonb arrives parsed from pg and PGlite alike; a string is parsed to be safe.
const json = (value: unknown): Record<string, unknown> => (typeof value === 'string' ? JSON.parse(value) : (value as Record<string, unknown>))

const toEvent = (row: EventRow): EventRecord => ({ id: String(row.id), type: row.type, at: row.at, actor: json(row.actor), subject: json(row.subject), detail: json(row.detail) })

/** The actor of an event as a statement's jsonb parameter: an API key by its public id alone, never its secret. */
export const actorJson = (actor: Actor): string => JSON.stringify(actor.kind === 'apiKey' ? { kind: 'apiKey', keyId: actor.keyId } : { kind: 'admin' })

export function eventStore(db: Db) {
  return {
    /** A company's events, newest first, with ids below `beforeId` when given. */
    listEvents: (companyId: string, limit: number, beforeId?: string): Promise<EventRecord[]> =>
      all(
        db,
        `SELECT id, type, at, actor, subject, detail FROM event
         WHERE company_id = $1 AND ($2::bigint IS NULL OR id < $2::bigint) ORDER BY id DESC LIMIT $3`,
        [companyId, beforeId ?? null, limit],
        toEvent,
      ),

    /** Forgets events older than `days`; how many were forgotten. */
    pruneEvents: (days: number): Promise<number> =>
      count(db, `WITH gone AS (DELETE FROM event WHERE at < now() - $1::double precision * interval '1 day' RETURNING 1) SELECT count(*) AS n FROM gone`, [days]),
  }
}
