/**
 * Issue 19, point 9: a store that is away makes every verification that needs it a 503, and
 * the cause is logged a bounded number of times (once per interval), not once per request;
 * the 503s are counted on /metrics. The other routes' 503s are logged alike.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { migratedPglite } from '../../../support/pglite-template.js'
import { LOG_EVERY_MS } from '../../../../src/throttled-log.js'
import { createTenant, decodeToken, forgeHs256, hs256Kid, issueToken, startApp } from '../../../support/helpers.js'

const REQUESTS = 200
/** How many throttling intervals a run that began at `started` can have touched: the most log lines it may write. */
const intervalsSince = (started: number) => 1 + Math.ceil((Date.now() - started) / LOG_EVERY_MS)
const CAUSE = 'verification could not be decided'

t.test('a node whose store is away: many 503s, the cause logged a bounded number of times, every one counted', async (t) => {
  const db = await migratedPglite()
  const node = await startApp(t, { DATA_DIR: 'memory://' }, { db })
  const issued = await issueToken(node, await createTenant(node), 'away')
  const { payload } = decodeToken(issued.token)
  t.equal((await node.inject({ method: 'GET', url: '/rest/v1/auth/verify', headers: { authorization: `Bearer ${issued.token}` } })).statusCode, 200, 'control: a good token')
  await db.close()
  const statuses = new Map<number, number>()
  const started = Date.now()
  for (let i = 0; i < REQUESTS; i++) {
    // a user no cache holds: its verification must read the store
    const token = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...payload, sub: randomUUID(), jti: randomUUID() })
    const response = await node.inject({ method: 'GET', url: '/rest/v1/auth/verify', headers: { authorization: `Bearer ${token}` } })
    statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1)
  }
  t.strictSame([...statuses], [[503, REQUESTS]], 'every verification is a 503')
  const causes = node.logs.filter((line) => line.includes(CAUSE))
  t.ok(causes.length >= 1, 'the cause is logged')
  // once per interval: a slow machine may spend several intervals on the requests
  const bound = intervalsSince(started)
  t.ok(causes.length <= bound, `logged ${causes.length} times for ${REQUESTS} answers, at most once per interval (${bound} began)`)
  t.ok(causes.every((line) => line.length < 4096))
  t.comment(`${causes.reduce((sum, line) => sum + line.length, 0)} bytes of log for ${REQUESTS} answers`)
  const scraped = (await node.inject({ method: 'GET', url: '/metrics' })).body
  t.match(scraped, new RegExp(`^chat_auth_verify_unavailable_total ${REQUESTS}$`, 'm'), 'every 503 counted')

  // The other routes alike: an admin read of a store that is away.
  const admin = new Map<number, number>()
  for (let i = 0; i < 50; i++) {
    const response = await node.admin('GET', `/admin/v1/companies/${randomUUID()}`)
    admin.set(response.statusCode, (admin.get(response.statusCode) ?? 0) + 1)
  }
  t.strictSame([...admin], [[503, 50]], 'every admin read is a 503')
  const unavailable = node.logs.filter((line) => line.includes('store unavailable'))
  t.ok(unavailable.length >= 1 && unavailable.length <= intervalsSince(started), `logged ${unavailable.length} times for 50 answers`)
})
