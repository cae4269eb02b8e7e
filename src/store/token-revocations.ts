import { ADMIN, type Actor, type RevokedToken } from '../domain.js'
import type { Db } from './db.js'
import { actorJson } from './events.js'
import { all, count, one } from './query.js'

/** One token's revocation, as committed; `first` is false for a repeated one. */
export interface TokenRevocation extends RevokedToken {
  companyId: string
  first: boolean
}

interface RevokedTokenRow {
  jti: string
  expires_at: Date
}

const toRevokedToken = (row: RevokedTokenRow): RevokedToken => ({ jti: row.jti, exp: Math.round(row.expires_at.getTime() / 1000) })

/** Tokens revoked one by one (SPEC §7.1), each kept until the token itself expires. */
export function tokenRevocationStore(db: Db) {
  return {
    /**
     * Revokes one token until its exp. A repeated revocation updates nothing but is still
     * recorded (without an event) and announced: the caller answers only once every node
     * refuses the token, even when a first call for it is still publishing. The change is
     * the row `jti` at "revision" exp (see `Change` in domain.ts); it is recorded with
     * record_change() in the same statement (migrations/007_record_change.sql).
     */
    revokeToken: (companyId: string, jti: string, exp: number, userId: string, actor: Actor = ADMIN): Promise<TokenRevocation | undefined> =>
      one(
        db,
        `WITH changed AS (
           INSERT INTO revoked_token (jti, company_id, expires_at) VALUES ($1, $2, to_timestamp($3))
           ON CONFLICT (jti) DO UPDATE SET jti = EXCLUDED.jti
           RETURNING jti, company_id, expires_at, (xmax = 0) AS first)
         SELECT changed.*, record_change('token', jti, extract(epoch FROM expires_at)::bigint, company_id, CASE WHEN first THEN 'token.revoked' END, $5,
                  jsonb_build_object('kind', 'token', 'jti', jti),
                  jsonb_build_object('userId', $4::text, 'expiresAt', to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')))
         FROM changed`,
        [jti, companyId, exp, userId, actorJson(actor)],
        (row: RevokedTokenRow & { company_id: string; first: boolean }) => ({ ...toRevokedToken(row), companyId: row.company_id, first: row.first }),
      ),

    getRevokedToken: (jti: string): Promise<RevokedToken | undefined> => one(db, `SELECT jti, expires_at FROM revoked_token WHERE jti = $1`, [jti], toRevokedToken),

    isTokenRevoked: async (jti: string): Promise<boolean> => (await db.query(`SELECT 1 FROM revoked_token WHERE jti = $1`, [jti])).length > 0,

    /**
     * Jtis of the revocations kept (housekeeping prunes the expired ones), greater than
     * `after`, in order: one page of a load that walks the primary key, so that no query holds
     * or returns the whole table. No condition on `expires_at`: with it each row of a page
     * is a heap read (the jtis are random, so each on its own page), three times the walk's
     * time at 3.5 M rows (bench/RESULTS.md); a revocation expired but not yet pruned costs a
     * few bits of the filter, and no node's clock decides what is loaded.
     */
    revokedJtis: (after: string, limit: number): Promise<string[]> =>
      all(db, `SELECT jti FROM revoked_token WHERE jti > $1 ORDER BY jti LIMIT $2`, [after, limit], (row: { jti: string }) => row.jti),

    /** Forgets revocations of tokens expired (past `graceSeconds`); how many were forgotten. */
    pruneRevokedTokens: (graceSeconds: number): Promise<number> =>
      count(
        db,
        `WITH gone AS (DELETE FROM revoked_token WHERE expires_at <= now() - $1::double precision * interval '1 second' RETURNING 1) SELECT count(*) AS n FROM gone`,
        [graceSeconds],
      ),
  }
}
