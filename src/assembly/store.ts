import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import { throttledLog } from '../throttled-log.js'
import { claimDatabase, type DatabaseClaim } from '../store/database-claim.js'
import { createPgliteDb, createPostgresDb, type Db } from '../store/db.js'
import { migrate } from '../store/migrate.js'
import { createStore, type Store } from '../store/store.js'
import type { OnClose } from './lifecycle.js'

export interface OpenedStore {
  db: Db
  store: Store
  /** with DATABASE_URL: this node's claim on the database (see store/database-claim.ts) */
  claim: DatabaseClaim | undefined
}

/**
 * The database (PostgreSQL with DATABASE_URL, else the embedded PGlite, or one handed in
 * that the caller owns), the node's claim on it, and the migrations. Several nodes on one
 * database without a shared bus would serve stale caches: the claim refuses that.
 */
export async function openStore(onClose: OnClose, config: Config, options: { logger: Logger; metrics: Metrics; db?: Db | undefined }): Promise<OpenedStore> {
  const { logger } = options
  // Registered whatever the store, so that the series is there from the start (0 without a pool).
  const onPoolError = poolErrorReporter(options.metrics, logger)
  const db = options.db ?? (config.databaseUrl ? createPostgresDb(config.databaseUrl, { onPoolError, preparedStatements: config.databasePreparedStatements }) : await createPgliteDb(config.dataDir))
  if (!options.db) onClose(() => db.close())
  const claim = config.databaseUrl && db.kind === 'postgres' ? await claimDatabase({ connectionString: config.databaseUrl, mode: config.redis ? 'shared' : 'exclusive', logger }) : undefined
  if (claim) onClose(() => claim.release())
  const { applied } = await migrate(db)
  if (applied.length) logger.info({ applied }, 'migrations applied')
  return { db, store: createStore(db), claim }
}

/** An idle PostgreSQL connection lost: counted, and logged at most once per 5 s. */
function poolErrorReporter(metrics: Metrics, logger: Logger): (error: Error) => void {
  const count = metrics.counter('chat_auth_store_pool_errors_total', 'Idle PostgreSQL connections lost (the next query opens a new one)')
  const warn = throttledLog(logger, Date.now)
  return (error) => {
    count()
    warn('an idle PostgreSQL connection was lost', { err: error.message })
  }
}
