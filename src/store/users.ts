import { randomUUID } from 'node:crypto'
import { ADMIN, type Actor, type UserState } from '../domain.js'
import type { Db } from './db.js'
import { actorJson } from './events.js'
import { all, one, type BigintColumn } from './query.js'

/** The customer users (SPEC §2): who a token is for, and the version that invalidates them all. */
export interface UserRecord extends UserState {
  createdAt: Date
  updatedAt: Date
}

// One SELECT list, so every statement maps its rows the same way.
const USER_COLUMNS = `id, company_id, external_id, agent_id, token_version, active, revision, created_at, updated_at`

interface UserRow {
  id: string
  company_id: string
  external_id: string
  agent_id: string
  token_version: number
  active: boolean
  revision: BigintColumn
  created_at: Date
  updated_at: Date
}

/** What bounds a company's new users (SPEC §7.3): NEW_USERS_BURST, NEW_USERS_PER_MINUTE, MAX_USERS_PER_COMPANY. */
export interface NewUserLimits {
  burst: number
  perMinute: number
  maxUsers: number
}

/**
 * A token's user, found or created under the company's lock, or why it was not created:
 * no agent to give it, the company at its total, or its new-user allowance spent (then the
 * seconds until it is not).
 */
export type UserCreation =
  | { outcome: 'created' | 'exists'; user: UserRecord }
  | { outcome: 'no-agent' | 'user-limit' }
  | { outcome: 'rate-limit'; retryAfterSeconds: number }

const toUser = (row: UserRow): UserRecord => ({
  id: row.id,
  companyId: row.company_id,
  externalId: row.external_id,
  agentId: row.agent_id,
  tokenVersion: row.token_version,
  active: row.active,
  revision: Number(row.revision),
  createdAt: row.created_at,
  updatedAt: row.updated_at,
})

// The publishing writes below record their change (and its event) with record_change() in
// their own statement: migrations/007_record_change.sql.
export function userStore(db: Db) {
  return {
    getUser: (id: string): Promise<UserRecord | undefined> => one(db, `SELECT ${USER_COLUMNS} FROM customer_user WHERE id = $1`, [id], toUser),

    /** Several users in one query (the caches' batched misses); absent ids are left out. */
    getUsers: (ids: string[]): Promise<UserRecord[]> => all(db, `SELECT ${USER_COLUMNS} FROM customer_user WHERE id = ANY($1::uuid[])`, [ids], toUser),

    /** Ids of the `limit` most recently created or changed users (a new node's cache warm-up). */
    recentUserIds: (limit: number): Promise<string[]> =>
      all(db, `SELECT id FROM customer_user ORDER BY updated_at DESC LIMIT $1`, [limit], (row: { id: string }) => row.id),

    getUserByExternalId: (companyId: string, externalId: string): Promise<UserRecord | undefined> =>
      one(db, `SELECT ${USER_COLUMNS} FROM customer_user WHERE company_id = $1 AND external_id = $2`, [companyId, externalId], toUser),

    /**
     * Creates the user with `agentId`, or with the company's default agent when it is
     * null, outside the per-company limits (fixtures and tools; tokens use `createUser`);
     * counted in the company's total all the same (migration 012's triggers). undefined: the
     * user already exists (the unique constraint decides), or there is no agent to give it.
     */
    createUserIfAbsent: (companyId: string, externalId: string, agentId: string | null): Promise<UserRecord | undefined> =>
      one(
        db,
        `INSERT INTO customer_user (id, company_id, external_id, agent_id)
         SELECT $1, c.id, $3, COALESCE($4::uuid, c.default_agent_id) FROM company c
         WHERE c.id = $2 AND COALESCE($4::uuid, c.default_agent_id) IS NOT NULL
         ON CONFLICT (company_id, external_id) DO NOTHING
         RETURNING ${USER_COLUMNS}`,
        [randomUUID(), companyId, externalId, agentId],
        toUser,
      ),

    /**
     * The token path's creation (SPEC §3.1 step 4, §7.3): the user with `agentId`, or with the
     * company's default agent when it is null, unless the company holds `limits.maxUsers`
     * users or has spent its allowance of new users; a user that exists is returned as it is,
     * never refused. create_customer_user() (migrations/012_new_user_limits.sql) decides under
     * the company row's lock, in this one statement; a refusal writes nothing. undefined: no
     * such company.
     */
    createUser: (companyId: string, externalId: string, agentId: string | null, limits: NewUserLimits): Promise<UserCreation | undefined> =>
      one(
        db,
        `SELECT outcome, retry_after, ${USER_COLUMNS} FROM create_customer_user($1, $2, $3, $4, $5, $6, $7)`,
        [randomUUID(), companyId, externalId, agentId, limits.burst, limits.perMinute, limits.maxUsers],
        (row: UserRow & { outcome: UserCreation['outcome']; retry_after: number | null }): UserCreation => {
          switch (row.outcome) {
            case 'created':
            case 'exists':
              return { outcome: row.outcome, user: toUser(row) }
            case 'rate-limit':
              return { outcome: row.outcome, retryAfterSeconds: row.retry_after! }
            default:
              return { outcome: row.outcome }
          }
        },
      ),

    /** Ties an active user to another agent; undefined when the user is inactive or gone. Not audited. */
    setUserAgent: (id: string, agentId: string): Promise<UserRecord | undefined> =>
      one(
        db,
        `WITH changed AS (
           UPDATE customer_user SET agent_id = $2, revision = revision + 1, updated_at = now()
           WHERE id = $1 AND active RETURNING ${USER_COLUMNS})
         SELECT changed.*, record_change('user', id::text, revision, company_id, NULL, NULL, NULL, NULL) FROM changed`,
        [id, agentId],
        toUser,
      ),

    /** One atomic increment: the row lock serialises concurrent calls, none is lost. */
    incrementTokenVersion: (companyId: string, id: string, actor: Actor = ADMIN): Promise<UserRecord | undefined> =>
      one(
        db,
        `WITH changed AS (
           UPDATE customer_user SET token_version = token_version + 1, revision = revision + 1, updated_at = now()
           WHERE id = $1 AND company_id = $2 RETURNING ${USER_COLUMNS})
         SELECT changed.*, record_change('user', id::text, revision, company_id, 'tokens.invalidated', $3,
                  jsonb_build_object('kind', 'user', 'id', id, 'externalId', external_id),
                  jsonb_build_object('newTokenVersion', token_version))
         FROM changed`,
        [id, companyId, actorJson(actor)],
        toUser,
      ),

    /** An event only when `active` changed (user.activated / user.deactivated). */
    setUserActive: (id: string, active: boolean, actor: Actor = ADMIN): Promise<UserRecord | undefined> =>
      one(
        db,
        `WITH changed AS (
           UPDATE customer_user SET active = $2, revision = revision + 1, updated_at = now()
           FROM (SELECT id AS old_id, active AS was_active FROM customer_user WHERE id = $1 FOR UPDATE) old
           WHERE id = old.old_id RETURNING ${USER_COLUMNS}, was_active)
         SELECT changed.*, record_change('user', id::text, revision, company_id,
                  CASE WHEN active = was_active THEN NULL WHEN active THEN 'user.activated' ELSE 'user.deactivated' END, $3,
                  jsonb_build_object('kind', 'user', 'id', id, 'externalId', external_id), NULL)
         FROM changed`,
        [id, active, actorJson(actor)],
        toUser,
      ),
  }
}
