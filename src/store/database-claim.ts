import { hostname } from 'node:os'
import pg from 'pg'
import type { Logger } from 'pino'
import { StoreUnavailableError } from '../errors.js'

/**
 * Which nodes may share one PostgreSQL database.
 *
 * A node caches what it read, and only the invalidation bus tells it that another node
 * changed a row. Nodes without a shared bus (no REDIS_URL) would therefore serve revoked
 * tokens forever once a second node writes. So every node holds a session advisory lock on
 * a connection of its own for as long as it runs:
 *
 * - a node without Redis takes it EXCLUSIVE: it is the only node on the database;
 * - a node with Redis takes it SHARED: any number of Redis nodes, and no lone node, run together.
 *
 * A node that cannot take the lock at start refuses to start (the message names REDIS_URL).
 * A node that loses it (the lock connection broke, PostgreSQL restarted) no longer vouches
 * for its cache — reads go to PostgreSQL — and its writes answer 503, until it has the lock
 * back; it then flushes its caches, since changes made meanwhile never reached it.
 */
export type ClaimMode = 'exclusive' | 'shared'

export interface DatabaseClaim {
  readonly mode: ClaimMode
  /** cheap enough for every request */
  held(): boolean
  /** called after the claim was lost and taken again, before the node trusts its cache again */
  onRegained(handler: () => void): void
  release(): Promise<void>
}

export class DatabaseClaimedError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'DatabaseClaimedError'
  }
}

// Two 32-bit keys ("chat", "node"): apart from the migrations' single 64-bit key.
const LOCK_KEYS = [0x63686174, 0x6e6f6465] as const

export interface ClaimOptions {
  connectionString: string
  mode: ClaimMode
  logger: Logger
  /** how often the lock connection proves itself alive */
  heartbeatMs?: number
  /** how long to wait between attempts to take a lost claim back */
  retryMs?: number
}

export async function claimDatabase(options: ClaimOptions): Promise<DatabaseClaim> {
  const { connectionString, mode, logger } = options
  const heartbeatMs = options.heartbeatMs ?? 1000
  const retryMs = options.retryMs ?? 1000
  const label = `chat-auth ${mode === 'exclusive' ? 'node without Redis' : 'node with Redis'} (pid ${process.pid} on ${hostname()})`
  const regainedHandlers: Array<() => void> = []
  let client: pg.Client | undefined
  let held = false
  let released = false
  let heartbeat: NodeJS.Timeout | undefined
  let retry: NodeJS.Timeout | undefined

  /** Opens a lock connection and tries the lock: the client when taken, else who holds it. */
  const attempt = async (): Promise<{ client: pg.Client } | { refused: string }> => {
    const candidate = new pg.Client({ connectionString, application_name: label.slice(0, 63), keepAlive: true, connectionTimeoutMillis: 2000, query_timeout: Math.max(2000, heartbeatMs * 2) })
    candidate.on('error', () => {}) // reported through `end` and the failing heartbeat
    try {
      await candidate.connect()
      const fn = mode === 'exclusive' ? 'pg_try_advisory_lock' : 'pg_try_advisory_lock_shared'
      const { rows } = await candidate.query<{ taken: boolean }>(`SELECT ${fn}($1, $2) AS taken`, [...LOCK_KEYS])
      if (rows[0]?.taken) return { client: candidate }
      const holders = await describeHolders(candidate)
      await candidate.end().catch(() => {})
      return { refused: holders }
    } catch (error) {
      await candidate.end().catch(() => {})
      throw error
    }
  }

  const hold = (taken: pg.Client) => {
    client = taken
    taken.once('end', () => lose(taken, 'the lock connection closed'))
    heartbeat = setInterval(() => {
      taken.query('SELECT 1').catch((error: unknown) => lose(taken, `the lock connection failed: ${error instanceof Error ? error.message : String(error)}`))
    }, heartbeatMs).unref()
  }

  const lose = (lost: pg.Client, reason: string) => {
    if (client !== lost || released) return
    held = false
    client = undefined
    clearInterval(heartbeat)
    lost.end().catch(() => {})
    logger.error({ reason, mode }, 'lost the claim on the database: serving from PostgreSQL (writes answer 503) until it is back')
    scheduleRetry()
  }

  const scheduleRetry = () => {
    if (released) return
    retry = setTimeout(async () => {
      try {
        const result = await attempt()
        if (released) {
          if ('client' in result) await result.client.end().catch(() => {})
          return
        }
        if ('client' in result) {
          // Changes made while the claim was lost never reached this node's caches.
          for (const handler of regainedHandlers) handler()
          hold(result.client)
          held = true
          logger.warn({ mode }, 'the claim on the database is back: serving from the cache again')
          return
        }
        logger.error({ holders: result.refused, mode }, `cannot take the claim on the database back: ${refusal(mode, result.refused)}`)
      } catch (error) {
        logger.warn({ err: error, mode }, 'cannot reach PostgreSQL to take the claim back')
      }
      scheduleRetry()
    }, retryMs).unref()
  }

  let first
  try {
    first = await attempt()
  } catch (error) {
    throw new StoreUnavailableError(`cannot claim the database: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  }
  if ('refused' in first) throw new DatabaseClaimedError(refusal(mode, first.refused))
  hold(first.client)
  held = true

  return {
    mode,
    held: () => held,
    onRegained(handler) {
      regainedHandlers.push(handler)
    },
    async release() {
      if (released) return
      released = true
      held = false
      clearInterval(heartbeat)
      clearTimeout(retry)
      const closing = client
      client = undefined
      // Ending the session releases the lock.
      await closing?.end().catch(() => {})
    },
  }
}

function refusal(mode: ClaimMode, holders: string): string {
  const who = holders ? ` (held by: ${holders})` : ''
  return mode === 'exclusive'
    ? `another chat-auth node uses this database${who}. Without REDIS_URL a node caches what it reads and no other node can tell it about a change, ` +
        'so only one node may run on a database: set REDIS_URL (the same Redis) on every node to run several, or stop the other one'
    : `a chat-auth node without REDIS_URL runs on this database${who} and claims it for itself: ` +
        'nodes with and without REDIS_URL cannot share a database; set REDIS_URL on every node'
}

/** Who holds the claim, from their connections' application_name (best effort: "" when not visible). */
async function describeHolders(client: pg.Client): Promise<string> {
  try {
    const { rows } = await client.query<{ who: string | null }>(
      `SELECT coalesce(nullif(a.application_name, ''), 'pid ' || a.pid) || coalesce(' from ' || host(a.client_addr), '') AS who
         FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND l.classid = $1::int::oid AND l.objid = $2::int::oid AND l.objsubid = 2`,
      [...LOCK_KEYS],
    )
    return rows.map((row) => row.who).filter(Boolean).join('; ')
  } catch {
    return ''
  }
}
