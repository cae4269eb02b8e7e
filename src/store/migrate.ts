import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Db } from './db.js'

/** `migrations/` at the package root, found from both `src/` and `dist/src/`. */
export const MIGRATIONS_DIR = fileURLToPath(new URL(import.meta.url.includes('/dist/') ? '../../../migrations/' : '../../migrations/', import.meta.url))

// Any fixed number shared by every node of the deployment: pg_advisory_lock(MIGRATION_LOCK).
const MIGRATION_LOCK = 0x63686174 // "chat"

/**
 * The bound on each statement of a migration, not the request path's 5 s: a node that
 * starts while another migrates waits on the lock for that whole migration, and a
 * migration may rewrite a large table. A database that stops answering still fails it.
 */
export const MIGRATION_STATEMENT_TIMEOUT_MS = 15 * 60_000

export interface MigrationResult {
  applied: string[]
}

/**
 * Applies the numbered SQL files of `migrations/` that are not yet applied, each in its
 * own transaction. Idempotent, and safe when several nodes start at once: they queue on
 * a session-level advisory lock and each re-reads what is applied once it holds it.
 */
export async function migrate(db: Db, directory = MIGRATIONS_DIR): Promise<MigrationResult> {
  const files = (await readdir(directory)).filter((name) => /^\d+_.+\.sql$/.test(name)).sort()
  return db.withSession(async (session) => {
    await session.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK])
    try {
      await session.exec(`CREATE TABLE IF NOT EXISTS schema_migration (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
      const done = new Set((await session.query<{ version: number }>('SELECT version FROM schema_migration')).map((r) => r.version))
      const applied: string[] = []
      for (const name of files) {
        const version = Number.parseInt(name, 10)
        if (done.has(version)) continue
        const sql = await readFile(join(directory, name), 'utf8')
        await session.exec('BEGIN')
        try {
          await session.exec(sql)
          await session.query('INSERT INTO schema_migration (version, name) VALUES ($1, $2)', [version, name])
          await session.exec('COMMIT')
        } catch (error) {
          await session.exec('ROLLBACK')
          throw new Error(`migration ${name} failed: ${(error as Error).message}`, { cause: error })
        }
        applied.push(name)
      }
      return { applied }
    } finally {
      await session.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK])
    }
  }, { statementTimeoutMs: MIGRATION_STATEMENT_TIMEOUT_MS })
}

