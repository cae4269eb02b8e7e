import { randomBytes } from 'node:crypto'
import pg from 'pg'
import t from 'tap'
import { createGateway } from '../../src/gateway.js'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/logger.js'
import { ADMIN_TOKEN, JWT_SECRET, STORE, createTenant, freshPostgresDatabase, invalidate, issueToken, startApp, verify } from '../support/helpers.js'
import { waitFor } from '../support/poll.js'
import { startGatewayProcess, type GatewayOptions, type GatewayProcess } from '../support/processes.js'

/**
 * No silent stale node: nodes on one PostgreSQL without a shared bus are refused, and a node
 * that loses its claim stops serving from its cache. Always against the real PostgreSQL, so
 * this file runs once, in the PostgreSQL pass.
 */
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const prefix = () => `chat-auth-test-claim-${randomBytes(4).toString('hex')}`

/**
 * A node process. KEEP_ALIVE_TIMEOUT=1: with a keep-alive hint that short, fetch keeps no
 * idle connection to the node, so stopping it does not wait out its 2 s drain for them.
 */
const startNode = (env: Record<string, string>, options: GatewayOptions = {}) => startGatewayProcess({ ADMIN_TOKEN, JWT_SECRET, KEEP_ALIVE_TIMEOUT: '1', ...env }, options)

/** Starts a node process that is expected to refuse to start; its output. */
async function refusedStart(env: Record<string, string>): Promise<string> {
  try {
    const node = await startNode(env, { waitFor: 'listening' })
    await node.stop()
    return 'STARTED'
  } catch (error) {
    return (error as Error).message
  }
}

const lockHolders = async (databaseUrl: string) => {
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    const { rows } = await client.query<{ pid: number; mode: string; application_name: string }>(
      `SELECT l.pid, l.mode, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND a.datname = current_database()`,
    )
    return rows
  } finally {
    await client.end()
  }
}

// Seven node processes in all: on a busy 2-core machine that takes a minute.
t.setTimeout(300_000)

if (STORE !== 'postgres') {
  t.pass('the database-claim tests run in the PostgreSQL pass')
} else {
  // One database through the three tests that start node processes: each starts where the
  // last left it (a lone node holding it), which saves node starts.
  t.test('one database, nodes with and without Redis', async (t) => {
    const DATABASE_URL = await freshPostgresDatabase(t)
    const teardown = t.teardown.bind(t)
    let lone: GatewayProcess | undefined

    await t.test('a second node without REDIS_URL on the same database exits at start, naming REDIS_URL', async (t) => {
      const first = await startNode({ DATABASE_URL }, { teardown })
      const output = await refusedStart({ DATABASE_URL })
      t.not(output, 'STARTED', 'the second node does not start')
      t.match(output, /exited \(1\)/)
      t.match(output, /REDIS_URL/, 'the message names REDIS_URL')
      t.match(output, /another chat-auth node uses this database \(held by: chat-auth node without Redis \(pid \d+/, 'and says who holds the database')
      t.equal((await fetch(first.url + '/readyz')).status, 200, 'the first node keeps serving')

      const holders = await lockHolders(DATABASE_URL)
      t.equal(holders.length, 1)
      t.equal(holders[0]!.mode, 'ExclusiveLock', 'the node without Redis holds the database exclusively')

      await first.stop()
      lone = await startNode({ DATABASE_URL }, { teardown })
      t.equal((await fetch(lone.url + '/readyz')).status, 200, 'once the first node stopped, another may take the database')
    })

    await t.test('an in-process (plugin) gateway on a database a lone node holds is refused, naming REDIS_URL', async (t) => {
      t.ok(lone, 'the lone node of the test above holds the database')
      const config = loadConfig({ DATABASE_URL, JWT_SECRET, LOG_LEVEL: 'silent' })
      await t.rejects(createGateway(config, { logger: createLogger(config) }), { name: 'DatabaseClaimedError', message: /REDIS_URL/ })
    })

    await t.test('nodes with and without Redis on the same database are refused, whichever starts first', async (t) => {
      t.ok(lone, 'the lone node of the first test holds the database')
      const withRedis = await refusedStart({ DATABASE_URL, REDIS_URL, REDIS_PREFIX: prefix() })
      t.match(withRedis, /a chat-auth node without REDIS_URL runs on this database/, 'a Redis node is refused next to a lone node')
      t.match(withRedis, /set REDIS_URL on every node/)
      await lone?.stop()

      const redisPrefix = prefix()
      const redisNode = await startNode({ DATABASE_URL, REDIS_URL, REDIS_PREFIX: redisPrefix }, { teardown })
      const secondRedisNode = await startNode({ DATABASE_URL, REDIS_URL, REDIS_PREFIX: redisPrefix }, { teardown })
      await waitFor('the second Redis node to be ready', async () => (await fetch(secondRedisNode.url + '/readyz')).status, { until: (status) => status === 200, timeoutMs: 10_000 })
      t.pass('nodes with Redis share the database')
      t.same((await lockHolders(DATABASE_URL)).map((h) => h.mode), ['ShareLock', 'ShareLock'], 'each holds it shared')
      const loneAgain = await refusedStart({ DATABASE_URL })
      t.match(loneAgain, /another chat-auth node uses this database/, 'a lone node is refused next to Redis nodes')
      t.match(loneAgain, /REDIS_URL/)
      t.equal((await fetch(redisNode.url + '/readyz')).status, 200)
    })
  })

  t.test('a node that loses its claim stops serving from its cache, refuses writes, and flushes when it has the claim back', async (t) => {
    const DATABASE_URL = await freshPostgresDatabase(t)
    const node = await startApp(t, { DATABASE_URL })
    const tenant = await createTenant(node)
    const issued = await issueToken(node, tenant, 'alice')
    t.equal((await verify(node, issued.token)).statusCode, 200, 'the user is now cached')
    const bob = await issueToken(node, tenant, 'bob')
    t.equal((await verify(node, bob.token)).statusCode, 200)

    // A write the node cannot see (as another node without a shared bus would make it).
    const admin = new pg.Client({ connectionString: DATABASE_URL })
    await admin.connect()
    t.teardown(() => admin.end())
    const bumpBehindTheNodesBack = (userId = issued.user.id) => admin.query('UPDATE customer_user SET token_version = token_version + 1, revision = revision + 1 WHERE id = $1', [userId])
    await bumpBehindTheNodesBack()
    t.equal((await verify(node, issued.token)).statusCode, 200, 'with its claim, the node answers from its cache (which is why nobody else may write unseen)')

    // The claim connection dies; a rival takes the lock before the node can take it back.
    const holders = await lockHolders(DATABASE_URL)
    t.equal(holders.length, 1, 'the node holds the claim')
    const rival = new pg.Client({ connectionString: DATABASE_URL })
    await rival.connect()
    t.teardown(() => rival.end())
    await admin.query('SELECT pg_terminate_backend($1)', [holders[0]!.pid])
    let taken = false
    for (let i = 0; i < 200 && !taken; i++) {
      taken = (await rival.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', [0x63686174, 0x6e6f6465])).rows[0]!.ok
      if (!taken) await new Promise((resolve) => setTimeout(resolve, 5))
    }
    t.ok(taken, 'the rival took the database')

    // The node learns of the loss when its lock connection reports it (at once here, on the FATAL message).
    await waitFor('the node to notice the loss', async () => (await node.inject({ method: 'GET', url: '/readyz' })).statusCode, { until: (status) => status === 503, timeoutMs: 10_000 })
    t.match(node.logs.join(''), /lost the claim on the database/, 'the loss is logged')
    const stale = await verify(node, issued.token)
    t.equal(stale.statusCode, 401, 'without its claim the node reads PostgreSQL: the change made behind its back is seen')
    t.equal(stale.json().message, 'Token has been revoked')
    t.same((await node.inject({ method: 'GET', url: '/readyz' })).json(), { status: 'unavailable', database: 'up', invalidationChannel: 'subscribed', cacheTrusted: false, cacheWarm: true, revocationsLoaded: true, clock: 'ok' }, '/readyz: not ready without the claim')
    const fresh = await issueToken(node, tenant, 'alice')
    const write = await invalidate(node, tenant, issued.user.id)
    t.equal(write.statusCode, 503, 'a write cannot be confirmed on every node: 503')
    // A read while the claim is lost may still fill the cache; a change behind its back follows.
    // bob was cached before the loss and changes behind the node's back while it is lost.
    await bumpBehindTheNodesBack(bob.user.id)

    await rival.query('SELECT pg_advisory_unlock($1, $2)', [0x63686174, 0x6e6f6465])
    await waitFor('the node to take its claim back', async () => (await node.inject({ method: 'GET', url: '/readyz' })).statusCode, { until: (status) => status === 200, timeoutMs: 10_000 })
    t.pass('the node took its claim back and is ready')
    t.match(node.logs.join(''), /the claim on the database is back/)
    t.equal((await verify(node, fresh.token)).statusCode, 401, 'the token issued before the 503 write is refused: that write committed')
    t.equal((await verify(node, bob.token)).statusCode, 401, 'nothing cached before the claim was lost is served: the caches were flushed when it came back')
    const latest = await issueToken(node, tenant, 'alice')
    t.equal((await verify(node, latest.token)).statusCode, 200)
    await bumpBehindTheNodesBack()
    t.equal((await verify(node, latest.token)).statusCode, 200, 'with the claim back, the cache serves again')
  })
}
