import type { Db } from './db.js'

/** Key material the service generates once and keeps (migrations/001_schema.sql, gateway_secret). */
export function secretStore(db: Db) {
  return {
    /** Returns the stored value, storing `candidate` first if there is none (first writer wins). */
    getOrCreateSecret: async (name: string, candidate: string): Promise<string> => {
      await db.query('INSERT INTO gateway_secret (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, candidate])
      return (await db.query<{ value: string }>('SELECT value FROM gateway_secret WHERE name = $1', [name]))[0]!.value
    },
  }
}
