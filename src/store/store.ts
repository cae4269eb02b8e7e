import { randomUUID } from 'node:crypto'
import type { Db } from './db.js'
import { ADMIN, apiKeyRevision, type Actor, type AgentState, type ApiKeyState, type CompanyState, type RevokedToken, type UserState } from '../domain.js'
import type { RowChanged } from '../domain.js'
import type { ChangeLog, HorizonBound } from '../bus/bus.js'

export interface UserRecord extends UserState {
  createdAt: Date
  updatedAt: Date
}

export interface AgentRecord extends AgentState {
  createdAt: Date
  /** the last revoke-tokens of the agent (SPEC §7.1) */
  tokensRevokedAt: Date | null
}

/** A company's revoke-tokens, as committed (SPEC §7.1). */
export interface CompanyTokensRevoked extends CompanyState {
  tokensRevokedAt: Date
}

/** One token's revocation, as committed; `first` is false for a repeated one. */
export interface TokenRevocation extends RevokedToken {
  companyId: string
  first: boolean
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
export type OutboxKind = 'user' | 'agent' | 'apiKey' | 'company' | 'token'

export interface OutboxEntry {
  id: string
  kind: string
  key: string
}

// One SELECT list per table, so every query maps rows the same way.
const USER_COLUMNS = `id, company_id, external_id, agent_id, token_version, active, revision, created_at, updated_at`
const AGENT_COLUMNS = `id, company_id, name, active, tokens_generation, tokens_revoked_at, revision, created_at`
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
  tokens_generation: number
  tokens_revoked_at: Date | null
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
  tokensGeneration: row.tokens_generation,
  revision: Number(row.revision),
  createdAt: row.created_at,
  tokensRevokedAt: row.tokens_revoked_at,
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
interface CompanyStateRow {
  id: string
  tokens_generation: number
  revision: string | number | bigint
}
const toCompanyState = (row: CompanyStateRow): CompanyState => ({ id: row.id, tokensGeneration: row.tokens_generation, revision: Number(row.revision) })

interface RevokedTokenRow {
  jti: string
  expires_at: Date
}
const toRevokedToken = (row: RevokedTokenRow): RevokedToken => ({ jti: row.jti, exp: Math.round(row.expires_at.getTime() / 1000) })

/** One audit event (SPEC §7.2), as stored. */
export interface EventRecord {
  id: string
  type: string
  at: Date
  actor: Record<string, unknown>
  subject: Record<string, unknown>
  detail: Record<string, unknown>
}
interface EventRow {
  id: string | number | bigint
  type: string
  at: Date
  actor: unknown
  subject: unknown
  detail: unknown
}
// jsonb arrives parsed from pg and PGlite alike; a string is parsed to be safe.
const json = (value: unknown): Record<string, unknown> => (typeof value === 'string' ? JSON.parse(value) : (value as Record<string, unknown>))

/**
 * One statement that runs `update` (an `UPDATE … RETURNING` of at most one row) and records
 * the change in change_outbox, so the commit and its outbox row are atomic (a trigger copies
 * the row into change_log, the record a node catches up from after a reconnect: see
 * migrations/003_change_log.sql). The result is the updated row plus `outbox_id`; no row
 * when nothing was updated (and then no outbox row). `revision` is an expression over the
 * updated row: the revision the change brought it to.
 */
const withOutbox = (kind: OutboxKind, keyColumn: string, update: string, revision = 'revision', event?: EventSql) =>
  `WITH changed AS (${update}),
        outbox AS (INSERT INTO change_outbox (kind, key, revision) SELECT '${kind}', ${keyColumn}::text, ${revision} FROM changed RETURNING id)${event ? ',\n' + eventInsert('changed', event) : ''}
   SELECT changed.*, outbox.id AS outbox_id FROM changed CROSS JOIN outbox`

/**
 * The audit event of a change (migrations/005_events.sql), written by the change's own
 * statement: expressions over the changed row, which has a `company_id` column.
 */
interface EventSql {
  /** SQL: the event type */
  type: string
  /** the placeholder of the actor's JSON among the statement's parameters, e.g. `$3` */
  actor: string
  /** SQL: the subject, a jsonb */
  subject: string
  /** SQL: the detail, a jsonb (default `{}`) */
  detail?: string
  /** SQL: only when this holds (a repeated revocation or an unchanged flag is no change) */
  when?: string
}

const eventInsert = (from: string, event: EventSql) =>
  `event AS (INSERT INTO event (company_id, type, actor, subject, detail)
             SELECT company_id, ${event.type}, ${event.actor}::jsonb, ${event.subject}, ${event.detail ?? `'{}'::jsonb`} FROM ${from}
             WHERE ${event.when ?? 'true'})`

const actorJson = (actor: Actor): string => JSON.stringify(actor.kind === 'apiKey' ? { kind: 'apiKey', keyId: actor.keyId } : { kind: 'admin' })

const outboxed =
  <Row, T>(map: (row: Row) => T) =>
  (row: Row & { outbox_id: string | number | bigint }): Outboxed<T> => ({ ...map(row), outboxId: String(row.outbox_id) })

export type Store = ReturnType<typeof createStore>

/**
 * The writes that change what verification sees. Each leaves a change_outbox row and must be
 * announced on the bus: only `changes.ts` calls them (see `Changes`); everything else gets
 * a `Store` without them.
 */
export type PublishingWrite =
  | 'updateAgent'
  | 'setUserAgent'
  | 'incrementTokenVersion'
  | 'setUserActive'
  | 'revokeApiKey'
  | 'revokeCompanyTokens'
  | 'revokeAgentTokens'
  | 'revokeToken'
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

    getCompanyState: (id: string): Promise<CompanyState | undefined> =>
      one(`SELECT id, tokens_generation, revision FROM company WHERE id = $1`, [id], toCompanyState),

    /** Several companies' states in one query (the caches' batched misses); absent ids are left out. */
    getCompanyStates: async (ids: string[]): Promise<CompanyState[]> =>
      (await db.query<CompanyStateRow>(`SELECT id, tokens_generation, revision FROM company WHERE id = ANY($1::uuid[])`, [ids])).map(toCompanyState),

    /** SPEC §7.1: every token of the company signed before this commits is revoked. */
    revokeCompanyTokens: (id: string, actor: Actor = ADMIN): Promise<Outboxed<CompanyTokensRevoked> | undefined> =>
      one(
        withOutbox(
          'company',
          'id',
          `UPDATE company SET tokens_generation = tokens_generation + 1, tokens_revoked_at = now(), revision = revision + 1
           WHERE id = $1 RETURNING id, id AS company_id, tokens_generation, tokens_revoked_at, revision`,
          'revision',
          {
            type: `'company.tokens_revoked'`,
            actor: '$2',
            subject: `jsonb_build_object('kind', 'company', 'id', id)`,
            detail: `jsonb_build_object('tokensGeneration', tokens_generation)`,
          },
        ),
        [id, actorJson(actor)],
        outboxed((row: CompanyStateRow & { tokens_revoked_at: Date }) => ({ ...toCompanyState(row), tokensRevokedAt: row.tokens_revoked_at })),
      ),

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

    /** An event only when `active` changed (agent.activated / agent.deactivated): a rename is not audited. */
    updateAgent: (id: string, patch: { name?: string; active?: boolean }, actor: Actor = ADMIN): Promise<Outboxed<AgentRecord> | undefined> =>
      one(
        withOutbox(
          'agent',
          'id',
          `UPDATE agent SET name = COALESCE($2, name), active = COALESCE($3, active), revision = revision + 1
           FROM (SELECT id AS old_id, active AS was_active FROM agent WHERE id = $1 FOR UPDATE) old
           WHERE id = old.old_id RETURNING ${AGENT_COLUMNS}, was_active`,
          'revision',
          {
            type: `CASE WHEN active THEN 'agent.activated' ELSE 'agent.deactivated' END`,
            actor: '$4',
            subject: `jsonb_build_object('kind', 'agent', 'id', id)`,
            when: 'active IS DISTINCT FROM was_active',
          },
        ),
        [id, patch.name ?? null, patch.active ?? null, actorJson(actor)],
        outboxed(toAgent),
      ),

    /** SPEC §7.1: every token of the agent signed before this commits is revoked. */
    revokeAgentTokens: (id: string, actor: Actor = ADMIN): Promise<Outboxed<AgentRecord> | undefined> =>
      one(
        withOutbox(
          'agent',
          'id',
          `UPDATE agent SET tokens_generation = tokens_generation + 1, tokens_revoked_at = now(), revision = revision + 1
           WHERE id = $1 RETURNING ${AGENT_COLUMNS}`,
          'revision',
          {
            type: `'agent.tokens_revoked'`,
            actor: '$2',
            subject: `jsonb_build_object('kind', 'agent', 'id', id)`,
            detail: `jsonb_build_object('tokensGeneration', tokens_generation)`,
          },
        ),
        [id, actorJson(actor)],
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
    incrementTokenVersion: (companyId: string, id: string, actor: Actor = ADMIN): Promise<Outboxed<UserRecord> | undefined> =>
      one(
        withOutbox(
          'user',
          'id',
          `UPDATE customer_user SET token_version = token_version + 1, revision = revision + 1, updated_at = now()
           WHERE id = $1 AND company_id = $2 RETURNING ${USER_COLUMNS}`,
          'revision',
          {
            type: `'tokens.invalidated'`,
            actor: '$3',
            subject: `jsonb_build_object('kind', 'user', 'id', id, 'externalId', external_id)`,
            detail: `jsonb_build_object('newTokenVersion', token_version)`,
          },
        ),
        [id, companyId, actorJson(actor)],
        outboxed(toUser),
      ),

    /** An event only when `active` changed (user.activated / user.deactivated). */
    setUserActive: (id: string, active: boolean, actor: Actor = ADMIN): Promise<Outboxed<UserRecord> | undefined> =>
      one(
        withOutbox(
          'user',
          'id',
          `UPDATE customer_user SET active = $2, revision = revision + 1, updated_at = now()
           FROM (SELECT id AS old_id, active AS was_active FROM customer_user WHERE id = $1 FOR UPDATE) old
           WHERE id = old.old_id RETURNING ${USER_COLUMNS}, was_active`,
          'revision',
          {
            type: `CASE WHEN active THEN 'user.activated' ELSE 'user.deactivated' END`,
            actor: '$3',
            subject: `jsonb_build_object('kind', 'user', 'id', id, 'externalId', external_id)`,
            when: 'active IS DISTINCT FROM was_active',
          },
        ),
        [id, active, actorJson(actor)],
        outboxed(toUser),
      ),

    // ── API keys ─────────────────────────────────────────────────────────────
    /** undefined: no such company. */
    createApiKey: (companyId: string, keyId: string, secretHash: Buffer, name: string | null, actor: Actor = ADMIN): Promise<ApiKeyRecord | undefined> =>
      one(
        // The event names the key by its public id: never its secret or hash.
        `WITH created AS (
           INSERT INTO api_key (key_id, company_id, secret_hash, name)
           SELECT $1, id, $3, $4 FROM company WHERE id = $2
           RETURNING ${API_KEY_COLUMNS}),
         ${eventInsert('created', { type: `'api_key.created'`, actor: '$5', subject: `jsonb_build_object('kind', 'apiKey', 'keyId', key_id)`, detail: `jsonb_build_object('name', name)` })}
         SELECT * FROM created`,
        [keyId, companyId, secretHash, name, actorJson(actor)],
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
    revokeApiKey: (keyId: string, actor: Actor = ADMIN): Promise<Outboxed<ApiKeyRecord> | undefined> =>
      one(
        withOutbox(
          'apiKey',
          'key_id',
          `UPDATE api_key SET revoked_at = COALESCE(revoked_at, now())
           FROM (SELECT key_id AS old_key_id, revoked_at IS NOT NULL AS was_revoked FROM api_key WHERE key_id = $1 FOR UPDATE) old
           WHERE key_id = old.old_key_id RETURNING ${API_KEY_COLUMNS}, was_revoked`,
          `CASE WHEN revoked_at IS NULL THEN ${apiKeyRevision(false)} ELSE ${apiKeyRevision(true)} END`,
          { type: `'api_key.revoked'`, actor: '$2', subject: `jsonb_build_object('kind', 'apiKey', 'keyId', key_id)`, when: 'NOT was_revoked' },
        ),
        [keyId, actorJson(actor)],
        outboxed(toApiKey),
      ),

    /** Best-effort bookkeeping, batched off the request path. */
    markApiKeysUsed: async (keyIds: string[]): Promise<void> => {
      if (keyIds.length === 0) return
      await db.query(`UPDATE api_key SET last_used_at = now() WHERE key_id = ANY($1::text[])`, [keyIds])
    },

    // ── revoked tokens (SPEC §7.1) ──────────────────────────────────────────────
    /**
     * Revokes one token until its exp. A repeated revocation updates nothing but is still
     * outboxed and announced: the caller answers only once every node refuses the token,
     * even when a first call for it is still publishing.
     */
    revokeToken: (companyId: string, jti: string, exp: number, userId: string, actor: Actor = ADMIN): Promise<Outboxed<TokenRevocation> | undefined> =>
      one(
        withOutbox(
          'token',
          'jti',
          `INSERT INTO revoked_token (jti, company_id, expires_at) VALUES ($1, $2, to_timestamp($3))
           ON CONFLICT (jti) DO UPDATE SET jti = EXCLUDED.jti
           RETURNING jti, company_id, expires_at, (xmax = 0) AS first`,
          `extract(epoch FROM expires_at)::bigint`,
          {
            type: `'token.revoked'`,
            actor: '$5',
            subject: `jsonb_build_object('kind', 'token', 'jti', jti)`,
            detail: `jsonb_build_object('userId', $4::text, 'expiresAt', to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`,
            when: 'first',
          },
        ),
        [jti, companyId, exp, userId, actorJson(actor)],
        outboxed((row: RevokedTokenRow & { company_id: string; first: boolean }) => ({ ...toRevokedToken(row), companyId: row.company_id, first: row.first })),
      ),

    getRevokedToken: (jti: string): Promise<RevokedToken | undefined> =>
      one(`SELECT jti, expires_at FROM revoked_token WHERE jti = $1`, [jti], toRevokedToken),

    isTokenRevoked: async (jti: string): Promise<boolean> => (await db.query(`SELECT 1 FROM revoked_token WHERE jti = $1`, [jti])).length > 0,

    /** Revocations whose token may still be presented: not expired, allowing `graceSeconds`. */
    liveRevokedTokens: async (graceSeconds: number): Promise<RevokedToken[]> =>
      (
        await db.query<RevokedTokenRow>(`SELECT jti, expires_at FROM revoked_token WHERE expires_at > now() - $1::double precision * interval '1 second'`, [
          graceSeconds,
        ])
      ).map(toRevokedToken),

    /** Forgets revocations of tokens expired (past `graceSeconds`); how many were forgotten. */
    pruneRevokedTokens: async (graceSeconds: number): Promise<number> =>
      Number(
        (
          await db.query<{ n: string | number }>(
            `WITH gone AS (DELETE FROM revoked_token WHERE expires_at <= now() - $1::double precision * interval '1 second' RETURNING 1) SELECT count(*) AS n FROM gone`,
            [graceSeconds],
          )
        )[0]!.n,
      ),

    // ── events (SPEC §7.2, migrations/005_events.sql) ─────────────────────────
    /** A company's events, newest first, with ids below `beforeId` when given. */
    listEvents: async (companyId: string, limit: number, beforeId?: string): Promise<EventRecord[]> =>
      (
        await db.query<EventRow>(
          `SELECT id, type, at, actor, subject, detail FROM event
           WHERE company_id = $1 AND ($2::bigint IS NULL OR id < $2::bigint) ORDER BY id DESC LIMIT $3`,
          [companyId, beforeId ?? null, limit],
        )
      ).map((row) => ({ id: String(row.id), type: row.type, at: row.at, actor: json(row.actor), subject: json(row.subject), detail: json(row.detail) })),

    /** Forgets events older than `days`; how many were forgotten. */
    pruneEvents: async (days: number): Promise<number> =>
      Number(
        (await db.query<{ n: string | number }>(`WITH gone AS (DELETE FROM event WHERE at < now() - $1::double precision * interval '1 day' RETURNING 1) SELECT count(*) AS n FROM gone`, [days]))[0]!.n,
      ),

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

    /**
     * In one statement: the xmin of this statement's snapshot, the smallest transaction id
     * of an outbox row (a change whose publish is not confirmed yet), and whether an outbox
     * row has no transaction id (written before migration 006). bus/catch-up.ts advances
     * its horizon from these.
     */
    horizonBound: async (): Promise<HorizonBound> => {
      const row = (
        await db.query<{ snapshot: string; outbox: string | null; unknown: boolean }>(
          `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS snapshot,
                  (SELECT min(xid) FROM change_outbox)::text AS outbox,
                  EXISTS (SELECT 1 FROM change_outbox WHERE xid IS NULL) AS unknown`,
        )
      )[0]!
      return { snapshotXmin: row.snapshot, outboxXmin: row.outbox ?? undefined, outboxWithoutXid: row.unknown }
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
