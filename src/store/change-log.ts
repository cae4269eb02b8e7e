import type { RowChanged } from '../domain.js'
import type { Db } from './db.js'
import { count, type BigintColumn } from './query.js'

/**
 * The change log (migrations/003_change_log.sql): one row per committed change, written by
 * the change's own statement through record_change() (migrations/007_record_change.sql),
 * read back here by a node that may have missed changes, and pruned by age.
 */
export interface ChangesRead {
  /** false: the read cannot prove it returned every change since the horizon; the caller must flush */
  complete: boolean
  /** the horizon of the next read */
  horizon: string
  changes: RowChanged[]
}

interface ChangeLogRow {
  kind: string
  key: string
  revision: BigintColumn | null
}

/** The horizon, whether rows it needs were pruned, and one change_log row (none: all NULL). */
interface ReadRow {
  horizon: string
  pruned: boolean
  kind: string | null
  key: string | null
  revision: BigintColumn | null
}

/** A change_log row as the change it announces; no revision recorded: evict whatever is held of the row. */
const toRowChanged = (row: ChangeLogRow): RowChanged => ({
  kind: row.kind as RowChanged['kind'],
  id: row.key,
  revision: row.revision === null ? Number.MAX_SAFE_INTEGER : Number(row.revision),
})

export function changeLogStore(db: Db) {
  return {
    /**
     * Every change committed since `horizon` was taken, read in one statement with the
     * horizon for next time (the xmin of this statement's own snapshot). Incomplete — the
     * caller must flush instead — when there is no horizon yet, when rows at or above it
     * may have been pruned, or when there are more than `limit` (a flush is cheaper).
     */
    changesSince: async (horizon: string | undefined, limit: number): Promise<ChangesRead> => {
      const rows = await db.query<ReadRow>(
        `SELECT h.xmin::text AS horizon,
                $1::xid8 IS NULL OR EXISTS (SELECT 1 FROM change_log_pruned WHERE through >= $1::xid8) AS pruned,
                l.kind, l.key, l.revision
         FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) h
         LEFT JOIN LATERAL (SELECT kind, key, revision FROM change_log WHERE xid >= $1::xid8 LIMIT $2) l ON true`,
        [horizon ?? null, limit + 1],
      )
      const first = rows[0]!
      // Nothing in the log since the horizon: the one row of the LEFT JOIN, with no change in it.
      const changes = rows.filter((row): row is ReadRow & ChangeLogRow => row.kind !== null && row.key !== null).map(toRowChanged)
      return { complete: !first.pruned && changes.length <= limit, horizon: first.horizon, changes }
    },

    /** Deletes change_log rows older than `maxAgeMs`, remembering the highest transaction id deleted. */
    pruneChangeLog: (maxAgeMs: number): Promise<number> =>
      count(
        db,
        `WITH gone AS (DELETE FROM change_log WHERE created_at < now() - $1::double precision * interval '1 millisecond' RETURNING xid),
              mark AS (INSERT INTO change_log_pruned (through) SELECT max(xid) FROM gone HAVING count(*) > 0
                       ON CONFLICT (only_row) DO UPDATE SET through = greatest(change_log_pruned.through, excluded.through))
         SELECT count(*) AS n FROM gone`,
        [maxAgeMs],
      ),
  }
}
