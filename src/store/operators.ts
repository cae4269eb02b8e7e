import type { Role } from '../domain.js'
import type { Db } from './db.js'
import { all, count, one } from './query.js'

/**
 * The named operators of the admin API and their console sessions (SPEC §10.1, §10.3;
 * migrations/013_operators.sql). Tokens and session ids are kept as SHA-256 hashes only.
 * Nothing here is cached: every request reads the row, so a revocation or a sign-out is seen
 * on every node from its commit on.
 */
export interface OperatorRecord {
  id: string
  name: string
  role: Role
  createdAt: Date
  revokedAt: Date | null
  lastUsedAt: Date | null
}

/** A live operator, as a request's caller. */
export interface LiveOperator {
  id: string
  name: string
  role: Role
}

/** A live console session: its operator (none: opened with ADMIN_TOKEN) and its anti-CSRF token. */
export interface LiveConsoleSession {
  operator: LiveOperator | undefined
  /** SHA-256 of the ADMIN_TOKEN it was opened with (undefined: an operator's session) */
  adminTokenHash: Buffer | undefined
  csrf: string
}

/** How long a console session lives, in seconds, by the database's clock. */
export interface SessionLifetime {
  idleSeconds: number
  maxAgeSeconds: number
}

const OPERATOR_COLUMNS = `id, name, role, created_at, revoked_at, last_used_at`

interface OperatorRow {
  id: string
  name: string
  role: Role
  created_at: Date
  revoked_at: Date | null
  last_used_at: Date | null
}

const toOperator = (row: OperatorRow): OperatorRecord => ({ id: row.id, name: row.name, role: row.role, createdAt: row.created_at, revokedAt: row.revoked_at, lastUsedAt: row.last_used_at })

interface SessionRow {
  operator_id: string | null
  name: string | null
  role: Role | null
  admin_token_hash: Uint8Array | null
  csrf: string
}

export function operatorStore(db: Db) {
  return {
    createOperator: async (operator: { id: string; name: string; role: Role; tokenHash: Buffer }): Promise<OperatorRecord> =>
      (await one(
        db,
        `INSERT INTO operator (id, name, role, token_hash) VALUES ($1, $2, $3, $4) RETURNING ${OPERATOR_COLUMNS}`,
        [operator.id, operator.name, operator.role, operator.tokenHash],
        toOperator,
      ))!,

    /** Oldest first, revoked ones too. */
    listOperators: (): Promise<OperatorRecord[]> => all(db, `SELECT ${OPERATOR_COLUMNS} FROM operator ORDER BY created_at, id`, [], toOperator),

    /**
     * Idempotent: a second revocation keeps the first time. Its console sessions end in the
     * same statement. undefined: no such operator.
     */
    revokeOperator: (id: string): Promise<{ id: string; revokedAt: Date } | undefined> =>
      one(
        db,
        `WITH revoked AS (
           UPDATE operator SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING id, revoked_at),
         ended AS (
           UPDATE console_session SET ended_at = now() WHERE operator_id IN (SELECT id FROM revoked) AND ended_at IS NULL)
         SELECT id, revoked_at FROM revoked`,
        [id],
        (row: { id: string; revoked_at: Date }) => ({ id: row.id, revokedAt: row.revoked_at }),
      ),

    /** The live (not revoked) operator whose token has this hash. */
    liveOperatorByTokenHash: (tokenHash: Buffer): Promise<LiveOperator | undefined> =>
      one(db, `SELECT id, name, role FROM operator WHERE token_hash = $1 AND revoked_at IS NULL`, [tokenHash], (row: LiveOperator) => ({ id: row.id, name: row.name, role: row.role })),

    /** Bookkeeping: at most one write a minute per operator, whichever node asks. */
    markOperatorUsed: async (id: string): Promise<void> => {
      await db.query(`UPDATE operator SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, [id])
    },

    createConsoleSession: async (session: { idHash: Buffer; operatorId: string | null; adminTokenHash: Buffer | null; csrf: string }): Promise<void> => {
      await db.query(`INSERT INTO console_session (id_hash, operator_id, admin_token_hash, csrf) VALUES ($1, $2, $3, $4)`, [
        session.idHash,
        session.operatorId,
        session.adminTokenHash,
        session.csrf,
      ])
    },

    /**
     * The session with this id hash while it lives (not ended, seen within the idle timeout,
     * younger than the absolute one, its operator not revoked), marked as seen now; in one
     * statement.
     */
    liveConsoleSession: (idHash: Buffer, lifetime: SessionLifetime): Promise<LiveConsoleSession | undefined> =>
      one(
        db,
        `WITH live AS (
           SELECT s.id_hash, s.operator_id, o.name, o.role, s.admin_token_hash, s.csrf
           FROM console_session s LEFT JOIN operator o ON o.id = s.operator_id
           WHERE s.id_hash = $1 AND s.ended_at IS NULL
             AND s.last_seen_at > now() - $2::double precision * interval '1 second'
             AND s.created_at > now() - $3::double precision * interval '1 second'
             AND (s.operator_id IS NULL OR o.revoked_at IS NULL)),
         seen AS (UPDATE console_session SET last_seen_at = now() WHERE id_hash IN (SELECT id_hash FROM live))
         SELECT operator_id, name, role, admin_token_hash, csrf FROM live`,
        [idHash, lifetime.idleSeconds, lifetime.maxAgeSeconds],
        (row: SessionRow): LiveConsoleSession => ({
          operator: row.operator_id === null ? undefined : { id: row.operator_id, name: row.name!, role: row.role! },
          adminTokenHash: row.admin_token_hash === null ? undefined : Buffer.from(row.admin_token_hash),
          csrf: row.csrf,
        }),
      ),

    /** Sign-out: whether a live session ended. */
    endConsoleSession: async (idHash: Buffer): Promise<boolean> =>
      (await db.query(`UPDATE console_session SET ended_at = now() WHERE id_hash = $1 AND ended_at IS NULL RETURNING 1`, [idHash])).length > 0,

    /** Forgets sessions that can no longer live (older than `maxAgeSeconds`); how many. */
    pruneConsoleSessions: (maxAgeSeconds: number): Promise<number> =>
      count(
        db,
        `WITH gone AS (DELETE FROM console_session WHERE created_at < now() - $1::double precision * interval '1 second' RETURNING 1) SELECT count(*) AS n FROM gone`,
        [maxAgeSeconds],
      ),
  }
}
