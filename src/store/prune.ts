import type { Db } from './db.js'
import { count } from './query.js'

/**
 * The age prune of a table read by snapshot cursors (change_log, migration 003; event, 009):
 * its rows older than the age deleted, and the highest transaction id deleted remembered in
 * the table's one-row `…_pruned` table, so that a reader whose cursor's xmin is not above it
 * knows rows it needs may be gone (the catch-up then flushes; the event stream sends
 * `reset`). One statement: the rows and the mark go together.
 */
export interface PrunedTable {
  table: 'change_log' | 'event'
  /** when a row was written */
  writtenAt: 'created_at' | 'at'
  /** the one-row table of the highest xid pruned */
  mark: 'change_log_pruned' | 'event_pruned'
  /** what the age is counted in: days are calendar days (PostgreSQL's interval arithmetic), as before */
  unit: 'millisecond' | 'day'
}

/** The statement for one table: fixed text, one per table (a prepared statement each). */
export function pruneStatement({ table, writtenAt, mark, unit }: PrunedTable): string {
  return `WITH gone AS (DELETE FROM ${table} WHERE ${writtenAt} < now() - $1::double precision * interval '1 ${unit}' RETURNING xid),
              mark AS (INSERT INTO ${mark} (through) SELECT max(xid) FROM gone HAVING count(*) > 0
                       ON CONFLICT (only_row) DO UPDATE SET through = greatest(${mark}.through, excluded.through))
         SELECT count(*) AS n FROM gone`
}

/** Runs `statement` (pruneStatement's) for rows older than `age`, in its unit; how many were deleted. */
export function pruneOlderThan(db: Db, statement: string, age: number): Promise<number> {
  return count(db, statement, [age])
}
