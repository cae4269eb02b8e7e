import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { readdir, readFile, rename, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import tap from 'tap'
import { createPgliteDb, type Db, type PgliteDb } from '../../src/store/db.js'
import { migrate, MIGRATIONS_DIR } from '../../src/store/migrate.js'
import type { Teardown } from './databases.js'
import { ROOT } from './processes.js'

/**
 * Migrated PGlite stores in a fraction of the time of fresh ones. initdb in WASM costs
 * seconds per store; so the first test process on a machine migrates one store and dumps
 * its data directory to a file named after the migrations and the PGlite version, and every
 * later store starts from that dump (a changed migration names a new file; two processes
 * racing to write it each write their own and rename it into place).
 */
export async function migratedPglite(): Promise<PgliteDb> {
  return createPgliteDb('memory://', { loadDataDir: await template() })
}

const idle: PgliteDb[] = []
let closeIdleAtExit = false

/**
 * A migrated, empty PGlite store for one test, handed back when the test ends: emptied
 * (every table but schema_migration truncated, identities restarted), it serves the next
 * test of this process. Loading a store costs a second of CPU, emptying one milliseconds.
 * The store must not be closed by the test.
 */
export async function emptyPglite(t: Teardown): Promise<Db> {
  if (!closeIdleAtExit) {
    closeIdleAtExit = true
    // an open PGlite keeps the process alive: close the idle ones once every test is done
    tap.teardown(() => Promise.all(idle.splice(0).map((db) => db.close())))
  }
  const db = idle.pop() ?? (await migratedPglite())
  t.teardown(async () => {
    await empty(db)
    idle.push(db)
  })
  return db
}

async function empty(db: Db): Promise<void> {
  const tables = await db.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migration'`)
  await db.query(`TRUNCATE ${tables.map((table) => `"${table.name}"`).join(', ')} RESTART IDENTITY CASCADE`)
}

let cached: Promise<Blob> | undefined

export function template(): Promise<Blob> {
  cached ??= loadOrMakeTemplate()
  return cached
}

async function loadOrMakeTemplate(): Promise<Blob> {
  const file = join(tmpdir(), `chat-auth-test-pglite-${await templateKey()}.tar`)
  if (existsSync(file)) return new Blob([await readFile(file)])
  const db = await createPgliteDb('memory://')
  try {
    await migrate(db)
    const dump = await db.dumpDataDir()
    const partial = `${file}.${process.pid}`
    await writeFile(partial, Buffer.from(await dump.arrayBuffer()))
    await rename(partial, file)
    return dump
  } finally {
    await db.close()
  }
}

export async function templateKey(): Promise<string> {
  const hash = createHash('sha256')
  const pglite = JSON.parse(await readFile(join(ROOT, 'node_modules/@electric-sql/pglite/package.json'), 'utf8')) as { version: string }
  hash.update(pglite.version)
  for (const name of (await readdir(MIGRATIONS_DIR)).sort()) hash.update(name).update(await readFile(join(MIGRATIONS_DIR, name)))
  return hash.digest('hex').slice(0, 16)
}
