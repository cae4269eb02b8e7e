import { randomBytes } from 'node:crypto'
import { createPostgresDb } from '../../src/store/db.js'
import { createScratchDatabase } from '../../test/support/databases.js'
import { layoutFor, prepareSql, sqlDataset, type Dataset } from './data.js'

export interface ScratchDataset {
  ds: Dataset
  /** the environment of a node on that database (with the dataset's JWT secret) */
  nodeEnv: Record<string, string>
  drop(): Promise<void>
}

/**
 * A scratch PostgreSQL database holding the kit's data for `hot` hot users (plus 2,000 for
 * `mixed` and 2,000 to invalidate): what the kit's single-node counters (instructions.ts,
 * gc-count.ts) run against. `drop` removes it.
 */
export async function scratchDataset(pgUrl: string, hot: number): Promise<ScratchDataset> {
  const scratch = await createScratchDatabase(pgUrl, 'bench')
  try {
    const layout = layoutFor(4000 + hot, hot, 2000, 2000)
    const db = createPostgresDb(scratch.url)
    const prepared = await prepareSql(db, layout).finally(() => db.close())
    const jwtSecret = randomBytes(48).toString('base64url')
    const nodeEnv = { DATABASE_URL: scratch.url, JWT_SECRET: jwtSecret, ADMIN_TOKEN: 'adm_' + randomBytes(24).toString('base64url'), LOG_LEVEL: 'warn', SEED_DEMO: 'false' }
    return { ds: sqlDataset(prepared, layout, jwtSecret), nodeEnv, drop: () => scratch.drop() }
  } catch (error) {
    await scratch.drop()
    throw error
  }
}
