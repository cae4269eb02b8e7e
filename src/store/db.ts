import { createHash } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import pg from 'pg'
import { StoreUnavailableError } from '../errors.js'
import { lockDataDir, type DataDirLock } from './data-dir-lock.js'

/**
 * The narrow SQL interface both back ends implement, so that `store.ts` holds the only
 * SQL of the service and runs unchanged on PostgreSQL (pg) and on PGlite.
 */
export interface Db {
  readonly kind: 'postgres' | 'pglite'
  query<Row>(sql: string, params?: readonly unknown[]): Promise<Row[]>
  /**
   * Runs `fn` on one connection (session-level advisory locks, multi-statement scripts).
   * `statementTimeoutMs` replaces the request path's bound on each of its statements: a
   * session may wait on a lock, or rewrite a table, for longer than a request may.
   */
  withSession<T>(fn: (session: DbSession) => Promise<T>, options?: { statementTimeoutMs?: number }): Promise<T>
  close(): Promise<void>
}

export interface DbSession {
  query<Row>(sql: string, params?: readonly unknown[]): Promise<Row[]>
  /** Several statements without parameters (a migration file). */
  exec(sql: string): Promise<void>
}

/** SQLSTATE classes that mean "the database cannot answer now", not "your statement is wrong". */
const UNAVAILABLE_SQLSTATE = /^(08|53|57|58)/
const UNAVAILABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH'])

function classify(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code
  const message = error instanceof Error ? error.message : String(error)
  const unavailable =
    (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || UNAVAILABLE_ERRNO.has(code))) ||
    /Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|connection is closed|PGlite is closed/i.test(message)
  return unavailable ? new StoreUnavailableError(`database unavailable: ${message}`, { cause: error }) : error
}

/**
 * The name a statement is prepared under, or undefined: run unnamed. PostgreSQL parses and
 * plans a named statement once per connection and an unnamed one on every call; for an
 * invalidation that was half of the server's CPU (bench/RESULTS.md). Only a statement with
 * parameters is named (one statement, the extended protocol either way), and at most
 * MAX_NAMED_STATEMENTS texts: the store's are fixed strings, and a caller that built its SQL
 * text anew for each call must not leave a statement per text on every connection.
 */
const MAX_NAMED_STATEMENTS = 500

function statementNames(): (sql: string) => string | undefined {
  const names = new Map<string, string>()
  return (sql) => {
    let name = names.get(sql)
    if (name === undefined && names.size < MAX_NAMED_STATEMENTS) {
      name = 'chat_auth_' + createHash('sha256').update(sql).digest('hex').slice(0, 32)
      names.set(sql, name)
    }
    return name
  }
}

export interface PostgresDbOptions {
  max?: number
  statementTimeoutMs?: number
  onPoolError?: (error: Error) => void
  /** false: every statement unnamed (a pooler in transaction mode that cannot keep them); default true */
  preparedStatements?: boolean
  /** how long an unused connection stays open (default 30 s) */
  idleTimeoutMs?: number
}

export function createPostgresDb(connectionString: string, options: PostgresDbOptions = {}): Db {
  const pool = new pg.Pool({
    connectionString,
    max: options.max ?? 10,
    connectionTimeoutMillis: 2000,
    // A request must never hang on a database that stopped answering: it gets a 503.
    query_timeout: options.statementTimeoutMs ?? 5000,
    idleTimeoutMillis: options.idleTimeoutMs ?? 30_000,
    keepAlive: true,
  })
  // An idle client losing its connection must not crash the process; the next query
  // reconnects. It is still reported (the gateway logs and counts it).
  pool.on('error', (error) => options.onPoolError?.(error))

  const nameOf = options.preparedStatements === false ? () => undefined : statementNames()
  const run = async <Row>(client: pg.Pool | pg.PoolClient, sql: string, params?: readonly unknown[], timeoutMs?: number): Promise<Row[]> => {
    try {
      const name = params === undefined ? undefined : nameOf(sql)
      const result =
        name === undefined && timeoutMs === undefined
          ? await client.query(sql, params as unknown[] | undefined)
          : await client.query({ name, text: sql, values: params as unknown[] | undefined, query_timeout: timeoutMs } as pg.QueryConfig)
      return result.rows as Row[]
    } catch (error) {
      throw classify(error)
    }
  }

  return {
    kind: 'postgres',
    query: (sql, params) => run(pool, sql, params),
    async withSession(fn, sessionOptions = {}) {
      const timeoutMs = sessionOptions.statementTimeoutMs
      let client: pg.PoolClient
      try {
        client = await pool.connect()
      } catch (error) {
        throw classify(error)
      }
      try {
        return await fn({
          query: (sql, params) => run(client, sql, params, timeoutMs),
          exec: async (sql) => {
            await run(client, sql, undefined, timeoutMs)
          },
        })
      } finally {
        client.release()
      }
    },
    close: () => pool.end(),
  }
}

export interface PgliteDb extends Db {
  /** The whole data directory as an uncompressed tarball, for `loadDataDir`. */
  dumpDataDir(): Promise<Blob>
}

/**
 * PGlite: the same PostgreSQL, compiled to WASM, in `dataDir` (or in memory for
 * `memory://`). One connection serves everything; PGlite queues concurrent queries.
 * A folder belongs to one process at a time (see data-dir-lock.ts): a second one is refused.
 * `loadDataDir` starts it from a dump of another data directory instead of an empty one.
 */
export async function createPgliteDb(dataDir: string, options: { loadDataDir?: Blob } = {}): Promise<PgliteDb> {
  const { PGlite } = await import('@electric-sql/pglite')
  let lock: DataDirLock | undefined
  if (!dataDir.startsWith('memory://')) {
    await mkdir(dataDir, { recursive: true })
    lock = await lockDataDir(dataDir)
  }
  let lite
  try {
    lite = await PGlite.create(dataDir, options.loadDataDir ? { loadDataDir: options.loadDataDir } : {})
  } catch (error) {
    await lock?.release()
    throw error
  }

  const run = async <Row>(sql: string, params?: readonly unknown[]): Promise<Row[]> => {
    try {
      const result = await lite.query<Row>(sql, params as unknown[] | undefined)
      return result.rows
    } catch (error) {
      throw classify(error)
    }
  }
  let closed = false
  return {
    kind: 'pglite',
    query: run,
    withSession: (fn) =>
      fn({
        query: run,
        exec: async (sql) => {
          await lite.exec(sql)
        },
      }),
    dumpDataDir: () => lite.dumpDataDir('none'),
    async close() {
      if (closed) return
      closed = true
      try {
        await lite.close()
      } finally {
        await lock?.release()
      }
    },
  }
}
