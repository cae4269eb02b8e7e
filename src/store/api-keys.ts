import { ADMIN, apiKeyRevision, type Actor, type ApiKeyState } from '../domain.js'
import type { Db } from './db.js'
import { actorJson } from './events.js'
import { all, one } from './query.js'

/** A company's API key, as the admin API shows it: never its secret or hash. */
export interface ApiKeyRecord {
  keyId: string
  companyId: string
  name: string | null
  createdAt: Date
  revokedAt: Date | null
  lastUsedAt: Date | null
}

// One SELECT list per use, so every statement maps its rows the same way.
const API_KEY_COLUMNS = `key_id, company_id, name, created_at, revoked_at, last_used_at`
const API_KEY_STATE_COLUMNS = `key_id, company_id, secret_hash, revoked_at IS NOT NULL AS revoked`

interface ApiKeyRow {
  key_id: string
  company_id: string
  name: string | null
  created_at: Date
  revoked_at: Date | null
  last_used_at: Date | null
}
interface ApiKeyStateRow {
  key_id: string
  company_id: string
  secret_hash: Uint8Array
  revoked: boolean
}

const toApiKey = (row: ApiKeyRow): ApiKeyRecord => ({
  keyId: row.key_id,
  companyId: row.company_id,
  name: row.name,
  createdAt: row.created_at,
  revokedAt: row.revoked_at,
  lastUsedAt: row.last_used_at,
})
const toApiKeyState = (row: ApiKeyStateRow): ApiKeyState => ({ keyId: row.key_id, companyId: row.company_id, secretHash: Buffer.from(row.secret_hash), revoked: row.revoked })

// Events name a key by its public id: never its secret or hash. The publishing write records
// its change (and its event) with record_change() in its own statement:
// migrations/007_record_change.sql.
export function apiKeyStore(db: Db) {
  return {
    /** undefined: no such company. */
    createApiKey: (companyId: string, keyId: string, secretHash: Buffer, name: string | null, actor: Actor = ADMIN): Promise<ApiKeyRecord | undefined> =>
      one(
        db,
        `WITH created AS (
           INSERT INTO api_key (key_id, company_id, secret_hash, name)
           SELECT $1, id, $3, $4 FROM company WHERE id = $2
           RETURNING ${API_KEY_COLUMNS})
         SELECT created.*, record_event(company_id, 'api_key.created', $5, jsonb_build_object('kind', 'apiKey', 'keyId', key_id), jsonb_build_object('name', name))
         FROM created`,
        [keyId, companyId, secretHash, name, actorJson(actor)],
        toApiKey,
      ),

    getApiKeyState: (keyId: string): Promise<ApiKeyState | undefined> => one(db, `SELECT ${API_KEY_STATE_COLUMNS} FROM api_key WHERE key_id = $1`, [keyId], toApiKeyState),

    /** Several keys in one query (the caches' batched misses); absent key ids are left out. */
    getApiKeyStates: (keyIds: string[]): Promise<ApiKeyState[]> =>
      all(db, `SELECT ${API_KEY_STATE_COLUMNS} FROM api_key WHERE key_id = ANY($1::text[])`, [keyIds], toApiKeyState),

    listApiKeys: (companyId: string): Promise<ApiKeyRecord[]> =>
      all(db, `SELECT ${API_KEY_COLUMNS} FROM api_key WHERE company_id = $1 ORDER BY created_at, key_id`, [companyId], toApiKey),

    /**
     * Idempotent: a second revocation keeps the first revocation time, and is recorded as a
     * change again (without an event). Its revision is always a revoked key's.
     */
    revokeApiKey: (keyId: string, actor: Actor = ADMIN): Promise<ApiKeyRecord | undefined> =>
      one(
        db,
        `WITH changed AS (
           UPDATE api_key SET revoked_at = COALESCE(revoked_at, now())
           FROM (SELECT key_id AS old_key_id, revoked_at IS NOT NULL AS was_revoked FROM api_key WHERE key_id = $1 FOR UPDATE) old
           WHERE key_id = old.old_key_id RETURNING ${API_KEY_COLUMNS}, was_revoked)
         SELECT changed.*, record_change('apiKey', key_id, $3, company_id, CASE WHEN was_revoked THEN NULL ELSE 'api_key.revoked' END, $2,
                  jsonb_build_object('kind', 'apiKey', 'keyId', key_id), NULL)
         FROM changed`,
        [keyId, actorJson(actor), apiKeyRevision(true)],
        toApiKey,
      ),

    /** Best-effort bookkeeping, batched off the request path. */
    markApiKeysUsed: async (keyIds: string[]): Promise<void> => {
      if (keyIds.length === 0) return
      await db.query(`UPDATE api_key SET last_used_at = now() WHERE key_id = ANY($1::text[])`, [keyIds])
    },
  }
}
