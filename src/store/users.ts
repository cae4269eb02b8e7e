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
     * null. undefined: the user already exists (another request may have just created
     * it: the unique constraint decides), or there is no agent to give it.
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
