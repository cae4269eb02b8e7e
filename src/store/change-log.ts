import type { RowChanged } from '../domain.js'
import type { Db } from './db.js'
import { count, type BigintColumn } from './query.js'
import { pruneOlderThan, pruneStatement } from './prune.js'

/**
 * The change log (migrations/003_change_log.sql): one row per committed change, written by
 * the change's own statement through record_change() (migrations/007_record_change.sql),
 * read back here by a node that may have missed changes, and pruned by age.
 *
 * Reading it in commit order. A number taken inside a transaction (a bigserial, the xid
 * itself) is not commit order: a transaction may take a smaller one and commit after a
 * reader has read past it. So the cursor is not a number but the snapshot of the previous
 * read (pg_current_snapshot(), the statement's own): a read returns exactly the rows that
 * snapshot did not see — committed since, whatever their xids — from its xmin up (every
 * transaction below the xmin had finished then, so its rows were seen, or rolled back).
 * No change is skipped, and none is returned twice, however transactions interleave; and a
 * transaction held open elsewhere on the server makes no read return more than what is new.
 */
export interface ChangesRead {
  /** false: the read cannot prove it returned every change since the cursor; the caller must flush */
  complete: boolean
  /** where the next read starts: this read's snapshot */
  cursor: string
  changes: RowChanged[]
}

interface ChangeLogRow {
  kind: string
  key: string
  revision: BigintColumn | null
}

/** The next cursor, whether rows the read needs were pruned, and one change_log row (none: all NULL). */
interface ReadRow {
  cursor: string
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
     * Every change committed since the read that returned `cursor`, with the cursor for the
     * next read, in one statement. Incomplete — the caller must flush instead — when there is
     * no cursor yet, when rows it had not seen may have been pruned, or when there are more
     * than `limit` (a flush is cheaper).
     */
    changesSince: async (cursor: string | undefined, limit: number): Promise<ChangesRead> => {
      const rows = await db.query<ReadRow>(
        `SELECT pg_current_snapshot()::text AS cursor,
                $1::pg_snapshot IS NULL OR EXISTS (SELECT 1 FROM change_log_pruned WHERE through >= pg_snapshot_xmin($1::pg_snapshot)) AS pruned,
                l.kind, l.key, l.revision
         FROM (SELECT) now
         LEFT JOIN LATERAL (
           SELECT kind, key, revision FROM change_log
           WHERE xid >= pg_snapshot_xmin($1::pg_snapshot) AND NOT pg_visible_in_snapshot(xid, $1::pg_snapshot)
           LIMIT $2) l ON true`,
        [cursor ?? null, limit + 1],
      )
      const first = rows[0]!
      // Nothing new in the log: the one row of the LEFT JOIN, with no change in it.
      const changes = rows.filter((row): row is ReadRow & ChangeLogRow => row.kind !== null && row.key !== null).map(toRowChanged)
      return { complete: !first.pruned && changes.length <= limit, cursor: first.cursor, changes }
    },

    /** How many changes committed after `at` (ms since the epoch), by the store's clock: how far behind a node that last read the log then is. */
    changesAfter: async (at: number): Promise<number> =>
      count(db, `SELECT count(*) AS n FROM change_log WHERE created_at > to_timestamp($1::double precision / 1000)`, [at]),

    /** Deletes change_log rows older than `maxAgeMs`, remembering the highest transaction id deleted. */
    pruneChangeLog: (maxAgeMs: number): Promise<number> => pruneOlderThan(db, PRUNE_CHANGE_LOG, maxAgeMs),
  }
}

const PRUNE_CHANGE_LOG = pruneStatement({ table: 'change_log', writtenAt: 'created_at', mark: 'change_log_pruned', unit: 'millisecond' })
