import type { Actor } from '../domain.js'
import type { Db } from './db.js'
import type { BigintColumn } from './query.js'
import { pruneOlderThan, pruneStatement } from './prune.js'

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

/** The actor of an event as a statement's jsonb parameter: an API key by its public id alone, an operator by id and name; never a secret. */
export const actorJson = (actor: Actor): string =>
  JSON.stringify(actor.kind === 'apiKey' ? { kind: 'apiKey', keyId: actor.keyId } : actor.kind === 'operator' ? { kind: 'operator', id: actor.id, name: actor.name } : { kind: 'admin' })

/** An event as the stream reads it: with its company and the transaction that wrote it. */
export interface CommittedEvent extends EventRecord {
  companyId: string
  /** the writing transaction's id (xid8, as text) */
  xid: string
}

/** What one read of events committed since a cursor found. */
export interface EventsRead {
  /** the read's own snapshot: the cursor of the next read */
  snapshot: string
  /** events the cursor had not seen may have been pruned */
  pruned: boolean
  /** oldest id first */
  events: CommittedEvent[]
}

interface ReadRow {
  snapshot: string
  pruned: boolean
  id: BigintColumn | null
  company_id: string | null
  xid: string | null
  type: string | null
  at: Date | null
  actor: unknown
  subject: unknown
  detail: unknown
}

export function eventStore(db: Db) {
  return {
    /**
     * A company's events, newest first, with the read's snapshot; given `before` (a snapshot
     * and an id), only the events that snapshot saw, with ids below it: the next page of a
     * listing that began at that snapshot (migrations/009_event_xid.sql).
     */
    listEvents: async (companyId: string, limit: number, before?: { snapshot: string; id: string }): Promise<{ snapshot: string; events: EventRecord[] }> => {
      const rows = await db.query<ReadRow>(
        `SELECT pg_current_snapshot()::text AS snapshot, false AS pruned, e.id, e.company_id, e.xid, e.type, e.at, e.actor, e.subject, e.detail
         FROM (SELECT) now
         LEFT JOIN LATERAL (
           SELECT id, company_id, xid::text AS xid, type, at, actor, subject, detail FROM event
           WHERE company_id = $1 AND ($2::pg_snapshot IS NULL OR (pg_visible_in_snapshot(xid, $2::pg_snapshot) AND id < $3::bigint))
           ORDER BY id DESC LIMIT $4) e ON true`,
        [companyId, before?.snapshot ?? null, before?.id ?? null, limit],
      )
      return { snapshot: rows[0]!.snapshot, events: rows.filter((row) => row.id !== null).map((row) => toEvent(row as EventRow)) }
    },

    /**
     * The events of these companies whose transactions the snapshot `after` did not see
     * (migrations/009_event_xid.sql), only those `upTo` saw when given, and with an id above
     * `aboveId` when given; the first `limit` by id when given; with the read's own snapshot,
     * in one statement.
     */
    eventsSince: async (companyIds: string[], after: string, upTo?: string, aboveId?: string, limit?: number): Promise<EventsRead> => {
      const rows = await db.query<ReadRow>(
        `SELECT pg_current_snapshot()::text AS snapshot,
                EXISTS (SELECT 1 FROM event_pruned WHERE through >= pg_snapshot_xmin($2::pg_snapshot)) AS pruned,
                e.id, e.company_id, e.xid, e.type, e.at, e.actor, e.subject, e.detail
         FROM (SELECT) now
         LEFT JOIN LATERAL (
           SELECT id, company_id, xid::text AS xid, type, at, actor, subject, detail FROM event
           WHERE company_id = ANY($1::uuid[]) AND xid >= pg_snapshot_xmin($2::pg_snapshot) AND NOT pg_visible_in_snapshot(xid, $2::pg_snapshot)
             AND ($3::pg_snapshot IS NULL OR pg_visible_in_snapshot(xid, $3::pg_snapshot))
             AND ($4::bigint IS NULL OR id > $4::bigint)
           ORDER BY id LIMIT $5::int) e ON true`,
        [companyIds, after, upTo ?? null, aboveId ?? null, limit ?? null],
      )
      const first = rows[0]!
      const events = rows
        .filter((row) => row.id !== null)
        .map((row) => ({ ...toEvent(row as EventRow), companyId: row.company_id!, xid: row.xid! }))
      return { snapshot: first.snapshot, pruned: first.pruned, events }
    },

    /** The store's current snapshot: a cursor that has seen every event committed so far. */
    eventSnapshot: async (): Promise<string> => (await db.query<{ snapshot: string }>(`SELECT pg_current_snapshot()::text AS snapshot`))[0]!.snapshot,

    /** Forgets events older than `days`, remembering the highest transaction id forgotten; how many were forgotten. */
    pruneEvents: (days: number): Promise<number> => pruneOlderThan(db, PRUNE_EVENTS, days),
  }
}

const PRUNE_EVENTS = pruneStatement({ table: 'event', writtenAt: 'at', mark: 'event_pruned', unit: 'day' })
