/**
 * What webhooks cost the write that makes an event (SPEC §9.3: the write only queues rows).
 * One in-process node (`--store pglite`: in memory; `postgres`: a scratch database), one
 * user; rounds of `--writes` sequential invalidations through `app.inject`, alternating: the
 * company with no webhook, then with 3 endpoints pointing at a receiver that never answers
 * (each delivery holds a connection for the 5 s timeout). p50/p99 of each round.
 *
 *   node dist/bench/webhook-writes.js [--store pglite|postgres] [--writes 300] [--rounds 3]
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import pino from 'pino'
import { buildApp } from '../src/app.js'
import { loadConfig } from '../src/config.js'
import { createScratchDatabase } from '../test/support/databases.js'

const { values } = parseArgs({ options: { store: { type: 'string', default: 'pglite' }, writes: { type: 'string', default: '300' }, rounds: { type: 'string', default: '3' } } })
const writes = Number(values.writes)
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'
const database = values.store === 'postgres' ? await createScratchDatabase(undefined, 'bench_webhooks') : undefined
const config = loadConfig({
  ADMIN_TOKEN,
  JWT_SECRET: 'bench-jwt-secret-that-is-at-least-32-bytes-long!',
  SEED_DEMO: 'false',
  LOG_LEVEL: 'warn',
  // The hanging receiver is on loopback: webhooks go only to public addresses unless allowed.
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8',
  ...(database ? { DATABASE_URL: database.url } : { DATA_DIR: 'memory://' }),
})
const { app } = await buildApp(config, { logger: pino({ level: 'warn' }) })
const held: Array<() => void> = []
const receiver = createServer((_request, response) => held.push(() => response.destroy()))
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`

const admin = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
  (await app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(payload ? { payload } : {}) })).json()
const company = await admin('POST', '/admin/v1/companies', { name: 'Bench' })
await admin('POST', `/admin/v1/companies/${company.id}/agents`, { name: 'bot' })
const key = await admin('POST', `/admin/v1/companies/${company.id}/api-keys`, {})
const issued = (await app.inject({ method: 'POST', url: '/rest/v1/auth/token', payload: { keyId: key.keyId, keySecret: key.keySecret, userId: 'u' } })).json()
const invalidate = { method: 'POST' as const, url: '/rest/v1/auth/invalidate-token', payload: { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.user.id } }

async function round(): Promise<string> {
  const times: number[] = []
  for (let i = 0; i < writes; i++) {
    const start = performance.now()
    const answer = await app.inject(invalidate)
    if (answer.statusCode !== 200) throw new Error(`invalidate: ${answer.statusCode} ${answer.body}`)
    times.push(performance.now() - start)
  }
  times.sort((a, b) => a - b)
  return `${times[Math.floor(writes / 2)]!.toFixed(2)}/${times[Math.floor(writes * 0.99)]!.toFixed(2)} ms`
}

await round() // warm-up
console.log(`store ${values.store}, ${writes} writes per round, p50/p99:`)
for (let i = 0; i < Number(values.rounds); i++) {
  const none = await round()
  const hooks = await Promise.all([1, 2, 3].map(() => admin('POST', `/admin/v1/companies/${company.id}/webhooks`, { url: hookUrl })))
  const hanging = await round()
  for (const hook of hooks) await admin('DELETE', `/admin/v1/webhooks/${hook.id}`)
  console.log(`  no webhook ${none}   3 hanging webhooks ${hanging}`)
}
console.log(`requests the receiver held: ${held.length}`)
held.forEach((drop) => drop())
receiver.close()
await app.close()
await database?.drop()
