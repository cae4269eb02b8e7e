import { ADMIN, type Actor, type RevokedToken } from '../domain.js'
import type { Db } from './db.js'
import { actorJson } from './events.js'
import { all, count, one } from './query.js'

/** What bounds a revocation: the company's live count, and how long past exp one is kept. */
export interface RevocationLimits {
  /** MAX_LIVE_TOKEN_REVOCATIONS */
  maxLive: number
  /** JWT_CLOCK_TOLERANCE + MAX_CLOCK_SKEW (clock/grace.ts) */
  graceSeconds: number
}

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

/**
 * Tokens revoked one by one (SPEC §7.1), each kept until the token itself expires, plus a
 * grace (JWT_CLOCK_TOLERANCE + MAX_CLOCK_SKEW: every clock that may still accept it).
 */
export function tokenRevocationStore(db: Db) {
  return {
    /**
     * Revokes one token until its exp, unless its company already holds `limits.maxLive`
     * live revocations ('limit-reached': nothing written) or, by the database's clock, the
     * token expired more than `limits.graceSeconds` ago ('expired': nothing written; the
     * same grace as `pruneRevokedTokens`, never the clock of the node that asks, which may
     * lead). A repeated revocation writes no row but is still recorded (without an event) and
     * announced: the caller answers only once every node refuses the token, even when a
     * first call for it is still publishing; it is never refused by the limit. The change is
     * the row `jti` at "revision" exp (see `Change` in domain.ts). revoke_token()
     * (migrations/008_live_token_revocations.sql) takes the company's lock, checks, writes
     * and records the change with record_change() in this one statement; the count it
     * checks is kept by triggers on revoked_token.
     */
    revokeToken: (companyId: string, jti: string, exp: number, userId: string, limits: RevocationLimits, actor: Actor = ADMIN): Promise<TokenRevocation | 'limit-reached' | 'expired' | undefined> =>
      one(
        db,
        `SELECT jti, company_id, expires_at, outcome FROM revoke_token($1, $2, to_timestamp($3), $4, $5, $6, $7)`,
        [jti, companyId, exp, limits.maxLive, userId, actorJson(actor), limits.graceSeconds],
        (row: RevokedTokenRow & { company_id: string; outcome: 'first' | 'repeat' | 'limit' | 'expired' }) =>
          row.outcome === 'limit' ? 'limit-reached' : row.outcome === 'expired' ? 'expired' : { ...toRevokedToken(row), companyId: row.company_id, first: row.outcome === 'first' },
      ),

    /** Which of these jtis are revoked: one query for many (the re-check of open sessions), or one (a filter's "maybe"). */
    revokedAmong: (jtis: string[]): Promise<string[]> => all(db, `SELECT jti FROM revoked_token WHERE jti = ANY($1::text[])`, [jtis], (row: { jti: string }) => row.jti),

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

    /** Forgets revocations of tokens expired `graceSeconds` ago by the database's clock; how many were forgotten. */
    pruneRevokedTokens: (graceSeconds: number): Promise<number> =>
      count(
        db,
        `WITH gone AS (DELETE FROM revoked_token WHERE expires_at <= now() - $1::double precision * interval '1 second' RETURNING 1) SELECT count(*) AS n FROM gone`,
        [graceSeconds],
      ),
  }
}
