import { randomUUID } from 'node:crypto'
import { ADMIN, type Actor, type AgentState, type CompanyState } from '../domain.js'
import type { Db } from './db.js'
import { actorJson } from './events.js'
import { all, count, one, type BigintColumn } from './query.js'
import type { NewUserLimits } from './users.js'

/** Companies and their agents (SPEC §2), with the generations that revoke their tokens (§7.1). */
export interface CompanyRecord {
  id: string
  name: string
  defaultAgentId: string | null
  createdAt: Date
}

/** A company's revoke-tokens, as committed (SPEC §7.1). */
export interface CompanyTokensRevoked extends CompanyState {
  tokensRevokedAt: Date
}

/** What a company holds of the shares SPEC §7.3 bounds (the admin's usage read). */
export interface CompanyUsage {
  companyId: string
  /** its customer users (MAX_USERS_PER_COMPANY bounds them) */
  users: number
  /** the new users it may create at once now, by the database's clock (at most NEW_USERS_BURST) */
  newUsersAvailable: number
  /** its live single-token revocations (MAX_LIVE_TOKEN_REVOCATIONS bounds them) */
  liveTokenRevocations: number
}

export interface AgentRecord extends AgentState {
  createdAt: Date
  /** the last revoke-tokens of the agent (SPEC §7.1) */
  tokensRevokedAt: Date | null
}

// One SELECT list per table, so every statement maps its rows the same way.
const COMPANY_COLUMNS = `id, name, default_agent_id, created_at`
const COMPANY_STATE_COLUMNS = `id, tokens_generation, revision`
const AGENT_COLUMNS = `id, company_id, name, active, tokens_generation, tokens_revoked_at, revision, created_at`

interface CompanyRow {
  id: string
  name: string
  default_agent_id: string | null
  created_at: Date
}
interface CompanyStateRow {
  id: string
  tokens_generation: number
  revision: BigintColumn
}
interface AgentRow {
  id: string
  company_id: string
  name: string
  active: boolean
  tokens_generation: number
  tokens_revoked_at: Date | null
  revision: BigintColumn
  created_at: Date
}

const toCompany = (row: CompanyRow): CompanyRecord => ({ id: row.id, name: row.name, defaultAgentId: row.default_agent_id, createdAt: row.created_at })
const toCompanyState = (row: CompanyStateRow): CompanyState => ({ id: row.id, tokensGeneration: row.tokens_generation, revision: Number(row.revision) })
const toAgent = (row: AgentRow): AgentRecord => ({
  id: row.id,
  companyId: row.company_id,
  name: row.name,
  active: row.active,
  tokensGeneration: row.tokens_generation,
  revision: Number(row.revision),
  createdAt: row.created_at,
  tokensRevokedAt: row.tokens_revoked_at,
})

// The publishing writes below record their change (and its event) with record_change() in
// their own statement: migrations/007_record_change.sql.
export function companyStore(db: Db) {
  return {
    createCompany: async (name: string): Promise<CompanyRecord> =>
      (await one(db, `INSERT INTO company (id, name) VALUES ($1, $2) RETURNING ${COMPANY_COLUMNS}`, [randomUUID(), name], toCompany))!,

    getCompany: (id: string): Promise<CompanyRecord | undefined> => one(db, `SELECT ${COMPANY_COLUMNS} FROM company WHERE id = $1`, [id], toCompany),

    /** undefined: no such company; 'foreign-agent': defaultAgentId is not one of its agents. */
    updateCompany: async (id: string, patch: { name?: string; defaultAgentId?: string }): Promise<CompanyRecord | undefined | 'foreign-agent'> => {
      const rows = await db.query<CompanyRow & { agent_ok: boolean }>(
        `WITH target AS (SELECT id FROM company WHERE id = $1),
              agent_ok AS (SELECT $3::uuid IS NULL OR EXISTS (SELECT 1 FROM agent WHERE id = $3::uuid AND company_id = $1) AS ok),
              updated AS (
                UPDATE company SET name = COALESCE($2, name), default_agent_id = COALESCE($3::uuid, default_agent_id)
                WHERE id = $1 AND (SELECT ok FROM agent_ok)
                RETURNING ${COMPANY_COLUMNS})
         SELECT updated.*, (SELECT ok FROM agent_ok) AS agent_ok FROM target LEFT JOIN updated ON true`,
        [id, patch.name ?? null, patch.defaultAgentId ?? null],
      )
      const row = rows[0]
      if (!row) return undefined
      if (!row.agent_ok) return 'foreign-agent'
      return toCompany(row)
    },

    /**
     * The company's counts against its limits: the ones the triggers of migrations 008 and
     * 012 keep, and its new-user allowance refilled to now by new_user_allowance(), the
     * formula create_customer_user() checks. No count of rows, whatever the company holds.
     */
    companyUsage: (id: string, newUsers: Pick<NewUserLimits, 'burst' | 'perMinute'>): Promise<CompanyUsage | undefined> =>
      one(
        db,
        `SELECT id, user_count, live_token_revocations,
                floor(new_user_allowance(new_user_allowance, new_user_allowance_at, clock_timestamp(), $2, $3))::integer AS available
         FROM company WHERE id = $1`,
        [id, newUsers.burst, newUsers.perMinute],
        (row: { id: string; user_count: number; live_token_revocations: number; available: number }) => ({
          companyId: row.id,
          users: row.user_count,
          newUsersAvailable: row.available,
          liveTokenRevocations: row.live_token_revocations,
        }),
      ),

    getCompanyState: (id: string): Promise<CompanyState | undefined> => one(db, `SELECT ${COMPANY_STATE_COLUMNS} FROM company WHERE id = $1`, [id], toCompanyState),

    /** Several companies' states in one query (the caches' batched misses); absent ids are left out. */
    getCompanyStates: (ids: string[]): Promise<CompanyState[]> => all(db, `SELECT ${COMPANY_STATE_COLUMNS} FROM company WHERE id = ANY($1::uuid[])`, [ids], toCompanyState),

    /** SPEC §7.1: every token of the company signed before this commits is revoked. */
    revokeCompanyTokens: (id: string, actor: Actor = ADMIN): Promise<CompanyTokensRevoked | undefined> =>
      one(
        db,
        `WITH changed AS (
           UPDATE company SET tokens_generation = tokens_generation + 1, tokens_revoked_at = now(), revision = revision + 1
           WHERE id = $1 RETURNING ${COMPANY_STATE_COLUMNS}, tokens_revoked_at)
         SELECT changed.*, record_change('company', id::text, revision, id, 'company.tokens_revoked', $2,
                  jsonb_build_object('kind', 'company', 'id', id), jsonb_build_object('tokensGeneration', tokens_generation))
         FROM changed`,
        [id, actorJson(actor)],
        (row: CompanyStateRow & { tokens_revoked_at: Date }) => ({ ...toCompanyState(row), tokensRevokedAt: row.tokens_revoked_at }),
      ),

    countCompanies: (): Promise<number> => count(db, 'SELECT count(*) AS n FROM company'),

    /**
     * SPEC §10.2: companies whose name contains `query` (case-insensitive; every company when
     * undefined), ordered by name then id, the first `limit` after the position `after`.
     */
    searchCompanies: (query: string | undefined, limit: number, after?: { name: string; id: string }): Promise<CompanyRecord[]> =>
      all(
        db,
        `SELECT ${COMPANY_COLUMNS} FROM company
         WHERE ($1::text IS NULL OR strpos(lower(name), lower($1::text)) > 0)
           AND ($2::text IS NULL OR (name, id) > ($2::text, $3::uuid))
         ORDER BY name, id LIMIT $4`,
        [query ?? null, after?.name ?? null, after?.id ?? null, limit],
        toCompany,
      ),

    /** SPEC §10.2's preview: the active users of a company (or of an agent) as the store knows them. */
    activeUsersOf: (scope: 'company' | 'agent', id: string): Promise<number> =>
      count(db, scope === 'company' ? 'SELECT count(*) AS n FROM customer_user WHERE company_id = $1 AND active' : 'SELECT count(*) AS n FROM customer_user WHERE agent_id = $1 AND active', [id]),

    /** The first agent of a company becomes its default agent. undefined: no such company. */
    createAgent: (companyId: string, name: string, active: boolean): Promise<AgentRecord | undefined> =>
      one(
        db,
        `WITH created AS (
           INSERT INTO agent (id, company_id, name, active)
           SELECT $1, id, $3, $4 FROM company WHERE id = $2
           RETURNING ${AGENT_COLUMNS}),
         made_default AS (
           UPDATE company SET default_agent_id = (SELECT id FROM created)
           WHERE id = $2 AND default_agent_id IS NULL AND EXISTS (SELECT 1 FROM created))
         SELECT * FROM created`,
        [randomUUID(), companyId, name, active],
        toAgent,
      ),

    /** The company's agents by name then id; undefined when there is no such company. */
    listAgents: async (companyId: string): Promise<AgentRecord[] | undefined> => {
      if ((await one(db, `SELECT 1 AS found FROM company WHERE id = $1`, [companyId], (row: { found: number }) => row.found)) === undefined) return undefined
      return all(db, `SELECT ${AGENT_COLUMNS} FROM agent WHERE company_id = $1 ORDER BY name, id`, [companyId], toAgent)
    },

    getAgent: (id: string): Promise<AgentRecord | undefined> => one(db, `SELECT ${AGENT_COLUMNS} FROM agent WHERE id = $1`, [id], toAgent),

    /** Several agents in one query (the caches' batched misses); absent ids are left out. */
    getAgents: (ids: string[]): Promise<AgentRecord[]> => all(db, `SELECT ${AGENT_COLUMNS} FROM agent WHERE id = ANY($1::uuid[])`, [ids], toAgent),

    /** An event only when `active` changed (agent.activated / agent.deactivated): a rename is not audited. */
    updateAgent: (id: string, patch: { name?: string; active?: boolean }, actor: Actor = ADMIN): Promise<AgentRecord | undefined> =>
      one(
        db,
        `WITH changed AS (
           UPDATE agent SET name = COALESCE($2, name), active = COALESCE($3, active), revision = revision + 1
           FROM (SELECT id AS old_id, active AS was_active FROM agent WHERE id = $1 FOR UPDATE) old
           WHERE id = old.old_id RETURNING ${AGENT_COLUMNS}, was_active)
         SELECT changed.*, record_change('agent', id::text, revision, company_id,
                  CASE WHEN active = was_active THEN NULL WHEN active THEN 'agent.activated' ELSE 'agent.deactivated' END, $4,
                  jsonb_build_object('kind', 'agent', 'id', id), NULL)
         FROM changed`,
        [id, patch.name ?? null, patch.active ?? null, actorJson(actor)],
        toAgent,
      ),

    /** SPEC §7.1: every token of the agent signed before this commits is revoked. */
    revokeAgentTokens: (id: string, actor: Actor = ADMIN): Promise<AgentRecord | undefined> =>
      one(
        db,
        `WITH changed AS (
           UPDATE agent SET tokens_generation = tokens_generation + 1, tokens_revoked_at = now(), revision = revision + 1
           WHERE id = $1 RETURNING ${AGENT_COLUMNS})
         SELECT changed.*, record_change('agent', id::text, revision, company_id, 'agent.tokens_revoked', $2,
                  jsonb_build_object('kind', 'agent', 'id', id), jsonb_build_object('tokensGeneration', tokens_generation))
         FROM changed`,
        [id, actorJson(actor)],
        toAgent,
      ),
  }
}
