import { randomUUID } from 'node:crypto'
import type { Db } from './db.js'
import { apiKeyRevision, type AgentState, type ApiKeyState, type UserState } from '../domain.js'
import type { ChangeLog, RowChanged } from '../bus/bus.js'

export interface UserRecord extends UserState {
  createdAt: Date
  updatedAt: Date
}

export interface AgentRecord extends AgentState {
  createdAt: Date
}

export interface CompanyRecord {
  id: string
  name: string
  defaultAgentId: string | null
  createdAt: Date
}

export interface ApiKeyRecord {
  keyId: string
  companyId: string
  name: string | null
  createdAt: Date
  revokedAt: Date | null
  lastUsedAt: Date | null
}

/** What a publishing write returns: the record, and the id of its change_outbox row. */
export type Outboxed<T> = T & { outboxId: string }

/** The kinds of change_outbox rows, one per kind of published change (see bus.ts). */
export type OutboxKind = 'user' | 'agent' | 'apiKey'

export interface OutboxEntry {
  id: string
  kind: string
  key: string
}

// One SELECT list per table, so every query maps rows the same way.
const USER_COLUMNS = `id, company_id, external_id, agent_id, token_version, active, revision, created_at, updated_at`
const AGENT_COLUMNS = `id, company_id, name, active, revision, created_at`
const COMPANY_COLUMNS = `id, name, default_agent_id, created_at`
const API_KEY_COLUMNS = `key_id, company_id, name, created_at, revoked_at, last_used_at`

interface UserRow {
  id: string
  company_id: string
  external_id: string
  agent_id: string
  token_version: number
  active: boolean
  revision: string | number | bigint
  created_at: Date
  updated_at: Date
}
interface AgentRow {
  id: string
  company_id: string
  name: string
  active: boolean
  revision: string | number | bigint
  created_at: Date
}
interface CompanyRow {
  id: string
  name: string
  default_agent_id: string | null
  created_at: Date
}
interface ApiKeyRow {
  key_id: string
  company_id: string
  name: string | null
  created_at: Date
  revoked_at: Date | null
  last_used_at: Date | null
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
const toAgent = (row: AgentRow): AgentRecord => ({
  id: row.id,
  companyId: row.company_id,
  name: row.name,
  active: row.active,
  revision: Number(row.revision),
  createdAt: row.created_at,
})
const toCompany = (row: CompanyRow): CompanyRecord => ({
  id: row.id,
  name: row.name,
  defaultAgentId: row.default_agent_id,
  createdAt: row.created_at,
})
const toApiKey = (row: ApiKeyRow): ApiKeyRecord => ({
  keyId: row.key_id,
  companyId: row.company_id,
  name: row.name,
  createdAt: row.created_at,
  revokedAt: row.revoked_at,
  lastUsedAt: row.last_used_at,
})

interface ApiKeyStateRow {
  key_id: string
  company_id: string
  secret_hash: Uint8Array
  revoked: boolean
}
const toApiKeyState = (row: ApiKeyStateRow): ApiKeyState => ({
  keyId: row.key_id,
  companyId: row.company_id,
  secretHash: Buffer.from(row.secret_hash),
  revoked: row.revoked,
})

/**
 * One statement that runs `update` (an `UPDATE … RETURNING` of at most one row) and records
 * the change in change_outbox, so the commit and its outbox row are atomic (a trigger copies
 * the row into change_log, the record a node catches up from after a reconnect: see
 * migrations/003_change_log.sql). The result is the updated row plus `outbox_id`; no row
 * when nothing was updated (and then no outbox row). `revision` is an expression over the
 * updated row: the revision the change brought it to.
 */
const withOutbox = (kind: OutboxKind, keyColumn: string, update: string, revision = 'revision') =>
  `WITH changed AS (${update}),
        outbox AS (INSERT INTO change_outbox (kind, key, revision) SELECT '${kind}', ${keyColumn}::text, ${revision} FROM changed RETURNING id)
   SELECT changed.*, outbox.id AS outbox_id FROM changed CROSS JOIN outbox`

const outboxed =
  <Row, T>(map: (row: Row) => T) =>
  (row: Row & { outbox_id: string | number | bigint }): Outboxed<T> => ({ ...map(row), outboxId: String(row.outbox_id) })

export type Store = ReturnType<typeof createStore>

/**
 * The writes that change what verification sees. Each leaves a change_outbox row and must be
 * announced on the bus: only `changes.ts` calls them (see `Changes`); everything else gets
 * a `Store` without them.
 */
export type PublishingWrite = 'updateAgent' | 'setUserAgent' | 'incrementTokenVersion' | 'setUserActive' | 'revokeApiKey'
export type StoreReads = Omit<Store, PublishingWrite>

/** Every SQL statement of the service, over either back end. */
export function createStore(db: Db) {
  const one = async <Row, T>(sql: string, params: unknown[], map: (row: Row) => T): Promise<T | undefined> => {
    const rows = await db.query<Row>(sql, params)
    return rows[0] === undefined ? undefined : map(rows[0])
  }

  return {
    db,

    ping: async (): Promise<void> => {
      await db.query('SELECT 1')
    },

    // ── companies ────────────────────────────────────────────────────────────
    createCompany: async (name: string): Promise<CompanyRecord> =>
      (await one(`INSERT INTO company (id, name) VALUES ($1, $2) RETURNING ${COMPANY_COLUMNS}`, [randomUUID(), name], toCompany))!,

    getCompany: (id: string): Promise<CompanyRecord | undefined> =>
      one(`SELECT ${COMPANY_COLUMNS} FROM company WHERE id = $1`, [id], toCompany),

    /** undefined: no such company; 'foreign-agent': defaultAgentId is not one of its agents. */
    updateCompany: async (
      id: string,
      patch: { name?: string; defaultAgentId?: string },
    ): Promise<CompanyRecord | undefined | 'foreign-agent'> => {
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

    countCompanies: async (): Promise<number> =>
      Number((await db.query<{ n: string | number }>('SELECT count(*) AS n FROM company'))[0]!.n),

    // ── agents ───────────────────────────────────────────────────────────────
    /** The first agent of a company becomes its default agent. undefined: no such company. */
    createAgent: (companyId: string, name: string, active: boolean): Promise<AgentRecord | undefined> =>
      one(
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

    getAgent: (id: string): Promise<AgentRecord | undefined> =>
      one(`SELECT ${AGENT_COLUMNS} FROM agent WHERE id = $1`, [id], toAgent),

    /** Several agents in one query (the caches' batched misses); absent ids are left out. */
    getAgents: async (ids: string[]): Promise<AgentRecord[]> =>
      (await db.query<AgentRow>(`SELECT ${AGENT_COLUMNS} FROM agent WHERE id = ANY($1::uuid[])`, [ids])).map(toAgent),

    updateAgent: (id: string, patch: { name?: string; active?: boolean }): Promise<Outboxed<AgentRecord> | undefined> =>
      one(
        withOutbox(
          'agent',
          'id',
          `UPDATE agent SET name = COALESCE($2, name), active = COALESCE($3, active), revision = revision + 1
           WHERE id = $1 RETURNING ${AGENT_COLUMNS}`,
        ),
        [id, patch.name ?? null, patch.active ?? null],
        outboxed(toAgent),
      ),

    // ── customer users ───────────────────────────────────────────────────────
    getUser: (id: string): Promise<UserRecord | undefined> =>
      one(`SELECT ${USER_COLUMNS} FROM customer_user WHERE id = $1`, [id], toUser),

    /** Several users in one query (the caches' batched misses); absent ids are left out. */
    getUsers: async (ids: string[]): Promise<UserRecord[]> =>
      (await db.query<UserRow>(`SELECT ${USER_COLUMNS} FROM customer_user WHERE id = ANY($1::uuid[])`, [ids])).map(toUser),

    /** Ids of the `limit` most recently created or changed users (a new node's cache warm-up). */
    recentUserIds: async (limit: number): Promise<string[]> =>
      (await db.query<{ id: string }>(`SELECT id FROM customer_user ORDER BY updated_at DESC LIMIT $1`, [limit])).map((row) => row.id),

    getUserByExternalId: (companyId: string, externalId: string): Promise<UserRecord | undefined> =>
      one(`SELECT ${USER_COLUMNS} FROM customer_user WHERE company_id = $1 AND external_id = $2`, [companyId, externalId], toUser),

    /**
     * Creates the user with `agentId`, or with the company's default agent when it is
     * null. undefined: the user already exists (another request may have just created
     * it: the unique constraint decides), or there is no agent to give it.
     */
    createUserIfAbsent: (companyId: string, externalId: string, agentId: string | null): Promise<UserRecord | undefined> =>
      one(
        `INSERT INTO customer_user (id, company_id, external_id, agent_id)
         SELECT $1, c.id, $3, COALESCE($4::uuid, c.default_agent_id) FROM company c
         WHERE c.id = $2 AND COALESCE($4::uuid, c.default_agent_id) IS NOT NULL
         ON CONFLICT (company_id, external_id) DO NOTHING
         RETURNING ${USER_COLUMNS}`,
        [randomUUID(), companyId, externalId, agentId],
        toUser,
      ),

    /** Ties an active user to another agent; undefined when the user is inactive or gone. */
    setUserAgent: (id: string, agentId: string): Promise<Outboxed<UserRecord> | undefined> =>
      one(
        withOutbox(
          'user',
          'id',
          `UPDATE customer_user SET agent_id = $2, revision = revision + 1, updated_at = now()
           WHERE id = $1 AND active RETURNING ${USER_COLUMNS}`,
        ),
        [id, agentId],
        outboxed(toUser),
      ),

    /** One atomic increment: the row lock serialises concurrent calls, none is lost. */
    incrementTokenVersion: (companyId: string, id: string): Promise<Outboxed<UserRecord> | undefined> =>
      one(
        withOutbox(
          'user',
          'id',
          `UPDATE customer_user SET token_version = token_version + 1, revision = revision + 1, updated_at = now()
           WHERE id = $1 AND company_id = $2 RETURNING ${USER_COLUMNS}`,
        ),
        [id, companyId],
        outboxed(toUser),
      ),

    setUserActive: (id: string, active: boolean): Promise<Outboxed<UserRecord> | undefined> =>
      one(
        withOutbox(
          'user',
          'id',
          `UPDATE customer_user SET active = $2, revision = revision + 1, updated_at = now()
           WHERE id = $1 RETURNING ${USER_COLUMNS}`,
        ),
        [id, active],
        outboxed(toUser),
      ),

    // ── API keys ─────────────────────────────────────────────────────────────
    /** undefined: no such company. */
    createApiKey: (companyId: string, keyId: string, secretHash: Buffer, name: string | null): Promise<ApiKeyRecord | undefined> =>
      one(
        `INSERT INTO api_key (key_id, company_id, secret_hash, name)
         SELECT $1, id, $3, $4 FROM company WHERE id = $2
         RETURNING ${API_KEY_COLUMNS}`,
        [keyId, companyId, secretHash, name],
        toApiKey,
      ),

    getApiKeyState: (keyId: string): Promise<ApiKeyState | undefined> =>
      one(`SELECT key_id, company_id, secret_hash, revoked_at IS NOT NULL AS revoked FROM api_key WHERE key_id = $1`, [keyId], toApiKeyState),

    /** Several keys in one query (the caches' batched misses); absent key ids are left out. */
    getApiKeyStates: async (keyIds: string[]): Promise<ApiKeyState[]> =>
      (
        await db.query<ApiKeyStateRow>(`SELECT key_id, company_id, secret_hash, revoked_at IS NOT NULL AS revoked FROM api_key WHERE key_id = ANY($1::text[])`, [keyIds])
      ).map(toApiKeyState),

    listApiKeys: async (companyId: string): Promise<ApiKeyRecord[]> =>
      (await db.query<ApiKeyRow>(`SELECT ${API_KEY_COLUMNS} FROM api_key WHERE company_id = $1 ORDER BY created_at, key_id`, [companyId])).map(
        toApiKey,
      ),

    /** Idempotent: a second revocation keeps the first revocation time. */
    revokeApiKey: (keyId: string): Promise<Outboxed<ApiKeyRecord> | undefined> =>
      one(
        withOutbox(
          'apiKey',
          'key_id',
          `UPDATE api_key SET revoked_at = COALESCE(revoked_at, now()) WHERE key_id = $1 RETURNING ${API_KEY_COLUMNS}`,
          `CASE WHEN revoked_at IS NULL THEN ${apiKeyRevision(false)} ELSE ${apiKeyRevision(true)} END`,
        ),
        [keyId],
        outboxed(toApiKey),
      ),

    /** Best-effort bookkeeping, batched off the request path. */
    markApiKeysUsed: async (keyIds: string[]): Promise<void> => {
      if (keyIds.length === 0) return
      await db.query(`UPDATE api_key SET last_used_at = now() WHERE key_id = ANY($1::text[])`, [keyIds])
    },

    // ── change outbox (see migrations/002_change_outbox.sql) ───────────────────
    /** Rows in the outbox, and how many of them are older than `minAgeMs` (by the database's clock). */
    outboxBacklog: async (minAgeMs: number): Promise<{ total: number; due: number }> => {
      const row = (
        await db.query<{ total: string | number; due: string | number }>(
          `SELECT count(*) AS total, count(*) FILTER (WHERE created_at < now() - $1::double precision * interval '1 millisecond') AS due
           FROM change_outbox`,
          [minAgeMs],
        )
      )[0]!
      return { total: Number(row.total), due: Number(row.due) }
    },

    /** The oldest outbox rows older than `minAgeMs`: changes whose publish was not confirmed (yet). */
    dueOutbox: async (minAgeMs: number, limit: number): Promise<OutboxEntry[]> =>
      (
        await db.query<{ id: string | number | bigint; kind: string; key: string }>(
          `SELECT id, kind, key FROM change_outbox
           WHERE created_at < now() - $1::double precision * interval '1 millisecond' ORDER BY id LIMIT $2`,
          [minAgeMs, limit],
        )
      ).map((row) => ({ id: String(row.id), kind: row.kind, key: row.key })),

    /** Forgets outbox rows whose change the bus confirmed. */
    deleteOutbox: async (ids: string[]): Promise<void> => {
      if (ids.length === 0) return
      await db.query(`DELETE FROM change_outbox WHERE id = ANY($1::bigint[])`, [ids])
    },

    // ── change log (see migrations/003_change_log.sql) ─────────────────────────
    /**
     * Every change committed since `horizon` was taken, read in one statement with the
     * horizon for next time (the xmin of this statement's own snapshot). Incomplete — the
     * caller must flush instead — when there is no horizon yet, when rows at or above it
     * may have been pruned, or when there are more than `limit` (a flush is cheaper).
     */
    changesSince: async (horizon: string | undefined, limit: number): ReturnType<ChangeLog['since']> => {
      const rows = await db.query<{ horizon: string; pruned: boolean; kind: string | null; key: string | null; revision: string | number | null }>(
        `SELECT h.xmin::text AS horizon,
                $1::xid8 IS NULL OR EXISTS (SELECT 1 FROM change_log_pruned WHERE through >= $1::xid8) AS pruned,
                l.kind, l.key, l.revision
         FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) h
         LEFT JOIN LATERAL (SELECT kind, key, revision FROM change_log WHERE xid >= $1::xid8 LIMIT $2) l ON true`,
        [horizon ?? null, limit + 1],
      )
      const first = rows[0]!
      const changes: RowChanged[] = []
      for (const row of rows) {
        if (row.kind === null || row.key === null) continue
        // No revision recorded: evict whatever is held of the row.
        changes.push({ kind: row.kind as RowChanged['kind'], id: row.key, revision: row.revision === null ? Number.MAX_SAFE_INTEGER : Number(row.revision) })
      }
      return { complete: !first.pruned && changes.length <= limit, horizon: first.horizon, changes }
    },

    /** Deletes change_log rows older than `maxAgeMs`, remembering the highest transaction id deleted. */
    pruneChangeLog: async (maxAgeMs: number): Promise<number> => {
      const rows = await db.query<{ n: string | number }>(
        `WITH gone AS (DELETE FROM change_log WHERE created_at < now() - $1::double precision * interval '1 millisecond' RETURNING xid),
              mark AS (INSERT INTO change_log_pruned (through) SELECT max(xid) FROM gone HAVING count(*) > 0
                       ON CONFLICT (only_row) DO UPDATE SET through = greatest(change_log_pruned.through, excluded.through))
         SELECT count(*) AS n FROM gone`,
        [maxAgeMs],
      )
      return Number(rows[0]!.n)
    },

    // ── generated secrets ────────────────────────────────────────────────────
    /** Returns the stored value, storing `candidate` first if there is none (first writer wins). */
    getOrCreateSecret: async (name: string, candidate: string): Promise<string> => {
      await db.query('INSERT INTO gateway_secret (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, candidate])
      return (await db.query<{ value: string }>('SELECT value FROM gateway_secret WHERE name = $1', [name]))[0]!.value
    },
  }
}
