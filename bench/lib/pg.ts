import { randomBytes } from 'node:crypto'
import pg from 'pg'

export const DEFAULT_PG_ADMIN_URL = 'postgres://root@127.0.0.1:5432/postgres'

export function withDatabase(adminUrl: string, database: string): string {
  const url = new URL(adminUrl)
  url.pathname = '/' + database
  return url.toString()
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

/** Creates a database with a random suffix; returns its URL and a function that drops it. */
export async function createScratchDatabase(adminUrl: string, prefix = 'bench'): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`
  const client = new pg.Client({ connectionString: adminUrl })
  await client.connect()
  try {
    await client.query(`CREATE DATABASE ${name}`)
  } finally {
    await client.end()
  }
  return {
    name,
    url: withDatabase(adminUrl, name),
    async drop() {
      const admin = new pg.Client({ connectionString: adminUrl })
      await admin.connect()
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await admin.end()
      }
    },
  }
}
