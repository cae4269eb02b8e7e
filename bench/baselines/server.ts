/**
 * The baselines every result is compared with, served by a process of their own like a node:
 *
 *   bare    a Fastify route answering a constant: the HTTP ceiling of this machine
 *   naive   what most tutorials build: verify the JWT (fast-jwt, no cache), then read the
 *           user's row from PostgreSQL on every request and compare token_version
 *   update  a plain single-row UPDATE of customer_user per request (the statement an
 *           invalidation commits), autocommit: what PostgreSQL commits cost here; with
 *           bare's constant verify and token routes beside it, so that `mixed`'s shape
 *           (95/4/1) can run against it: the ceiling of any server that commits its writes
 *   answer  bare's route answering a copy of the gateway's own verify answer (its headers
 *           and body, taken from the node by the kit): what carrying that answer costs the
 *           server and the load generator, with no verification behind it
 *
 *   node dist/bench/baselines/server.js bare|naive|update|answer
 *   env: PORT, DATABASE_URL (naive, update) or PGLITE_DIR (update on the embedded store), JWT_SECRET (naive),
 *        VERIFY_ANSWER (answer: JSON {headers, body})
 */
import Fastify from 'fastify'
import { createVerifier } from 'fast-jwt'
import pg from 'pg'
import type { Db } from '../../src/store/db.js'

const mode = process.argv[2]
const port = Number(process.env.PORT ?? 3100)
const app = Fastify({ logger: false })
app.get('/healthz', async () => ({ ok: true }))

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

if (mode === 'bare') {
  // same paths as the gateway's, so the load generator sends the very same requests
  const constant = { ok: true }
  app.all('/rest/v1/auth/verify', async () => constant)
  app.post('/rest/v1/auth/token', async () => constant)
  app.post('/rest/v1/auth/invalidate-token', async () => constant)
} else if (mode === 'naive') {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 10 })
  const verify = createVerifier({ key: process.env.JWT_SECRET!, algorithms: ['HS256'] })
  app.get('/rest/v1/auth/verify', async (request, reply) => {
    const header = request.headers.authorization ?? ''
    let claims: { sub: string; tokenVersion: number; companyId: string }
    try {
      claims = verify(header.slice(7))
    } catch {
      return reply.code(401).send({ statusCode: 401, message: 'Invalid token', code: 'INVALID_TOKEN' })
    }
    if (!UUID.test(claims.sub)) return reply.code(401).send({ statusCode: 401, message: 'Customer user not found or inactive', code: 'USER_NOT_FOUND' })
    const { rows } = await pool.query('SELECT id, external_id, company_id, agent_id, token_version, active FROM customer_user WHERE id = $1', [claims.sub])
    const user = rows[0]
    if (!user || !user.active) return reply.code(401).send({ statusCode: 401, message: 'Customer user not found or inactive', code: 'USER_NOT_FOUND' })
    if (user.token_version !== claims.tokenVersion) return reply.code(401).send({ statusCode: 401, message: 'Token has been revoked', code: 'TOKEN_REVOKED' })
    return { user: { id: user.id, externalId: user.external_id, companyId: user.company_id, agentId: user.agent_id }, tokenVersion: user.token_version }
  })
} else if (mode === 'update') {
  const constant = { ok: true }
  app.all('/rest/v1/auth/verify', async () => constant)
  app.post('/rest/v1/auth/token', async () => constant)
  let db: Db
  if (process.env.PGLITE_DIR) {
    const { createPgliteDb } = await import('../../src/store/db.js')
    db = await createPgliteDb(process.env.PGLITE_DIR)
  } else {
    const { createPostgresDb } = await import('../../src/store/db.js')
    db = createPostgresDb(process.env.DATABASE_URL!)
  }
  app.post<{ Body: { customerUserId: string } }>('/rest/v1/auth/invalidate-token', async (request) => {
    const rows = await db.query<{ token_version: number }>(
      'UPDATE customer_user SET token_version = token_version + 1, revision = revision + 1, updated_at = now() WHERE id = $1 RETURNING token_version',
      [request.body.customerUserId],
    )
    return { newTokenVersion: rows[0]?.token_version }
  })
} else if (mode === 'answer') {
  const { headers, body } = JSON.parse(process.env.VERIFY_ANSWER!) as { headers: Record<string, string>; body: string }
  app.all('/rest/v1/auth/verify', async (_request, reply) => {
    reply.headers(headers)
    return body
  })
} else {
  console.error('usage: server.js bare|naive|update|answer')
  process.exit(2)
}

await app.listen({ port, host: '127.0.0.1' })
const stop = () => {
  app.close().then(() => process.exit(0), () => process.exit(1))
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
// started by the kit with an IPC channel: gone with the kit, even when it was killed
process.on('disconnect', stop)
