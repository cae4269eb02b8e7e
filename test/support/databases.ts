import { randomBytes } from 'node:crypto'
import pg from 'pg'

/** The PostgreSQL server the suite and the bench make their scratch databases on. */
export const PG_ADMIN_URL = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'

/** `url` with its database part replaced by `database`. */
export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url)
  parsed.pathname = '/' + database
  return parsed.toString()
}

export async function pgReachable(adminUrl: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 2000 })
  try {
    await client.connect()
    await client.query('SELECT 1')
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => {})
  }
}

/** One statement on its own connection (CREATE DATABASE cannot run in a pool's transaction). */
export async function runOnServer(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

export interface ScratchDatabase {
  name: string
  url: string
  drop(): Promise<void>
}

/** A new, empty database `<prefix>_<random>` on the server of `adminUrl`; `drop` removes it. */
export async function createScratchDatabase(adminUrl: string = PG_ADMIN_URL, prefix = 'scratch'): Promise<ScratchDatabase> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`
  await runOnServer(adminUrl, `CREATE DATABASE ${name}`)
  return { name, url: withDatabase(adminUrl, name), drop: () => runOnServer(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) }
}

export interface Teardown {
  teardown(fn: () => unknown): void
}

/** A fresh PostgreSQL database for one test, dropped after it; its URL. */
export async function freshPostgresDatabase(t: Teardown): Promise<string> {
  const database = await createScratchDatabase(PG_ADMIN_URL, `chat_auth_test_${process.pid}`)
  t.teardown(() => database.drop())
  return database.url
}
