/**
 * webhook-writes: what webhooks cost the write that makes an event (SPEC §9.3: the write only
 * queues rows). One in-process node (`--store embedded`: in memory; `pg`: a scratch database),
 * one user; rounds of `--writes` sequential invalidations through `app.inject`, alternating:
 * the company with no webhook, then with 3 endpoints pointing at a receiver that never answers
 * (each delivery holds a connection for the 5 s timeout). p50/p99 of each round.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { performance } from 'node:perf_hooks'
import pino from 'pino'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createScratchDatabase } from '../../test/support/databases.js'
import { choice, common, number } from '../lib/args.js'
import { defineScenario } from '../lib/scenario.js'

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'

export default defineScenario({
  name: 'webhook-writes',
  description: "a write's latency with no webhook and with 3 hanging ones, in process (p50/p99 per round)",
  options: {
    store: choice("the node's store: the embedded store in memory, or a scratch database on --pg-url", ['pg', 'embedded'], 'embedded'),
    writes: number('invalidations per round and variant, one at a time', { default: 300, smoke: 20 }),
    rounds: common.rounds(3),
    pgUrl: common.pgUrl(),
  },
  smoke: true,
  async run(ctx) {
    const { writes, store } = ctx.opts
    const database = store === 'pg' ? await createScratchDatabase(ctx.opts.pgUrl, 'bench_webhooks') : undefined
    if (database) ctx.defer(() => database.drop())
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
    ctx.defer(() => app.close())
    const held: Array<() => void> = []
    const receiver = createServer((_request, response) => held.push(() => response.destroy()))
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    ctx.defer(() => {
      held.forEach((drop) => drop())
      receiver.close()
    })
    const hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`

    const admin = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: object) =>
      (await app.inject({ method, url, headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, ...(payload ? { payload } : {}) })).json()
    const company = await admin('POST', '/admin/v1/companies', { name: 'Bench' })
    await admin('POST', `/admin/v1/companies/${company.id}/agents`, { name: 'bot' })
    const key = await admin('POST', `/admin/v1/companies/${company.id}/api-keys`, {})
    const issued = (await app.inject({ method: 'POST', url: '/rest/v1/auth/token', payload: { keyId: key.keyId, keySecret: key.keySecret, userId: 'u' } })).json()
    const invalidate = { method: 'POST' as const, url: '/rest/v1/auth/invalidate-token', payload: { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.user.id } }

    const round = async (): Promise<string> => {
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
    const rows: string[][] = []
    for (let i = 0; i < ctx.opts.rounds; i++) {
      const none = await round()
      const hooks = await Promise.all([1, 2, 3].map(() => admin('POST', `/admin/v1/companies/${company.id}/webhooks`, { url: hookUrl })))
      const hanging = await round()
      for (const hook of hooks) await admin('DELETE', `/admin/v1/webhooks/${hook.id}`)
      rows.push([`round ${i + 1}`, none, hanging])
    }
    return {
      scenario: 'webhook-writes',
      title: `webhook-writes: store ${store}, ${writes} writes per round, p50/p99`,
      tables: [{ headers: ['', 'no webhook', '3 hanging webhooks'], rows }],
      lines: [`requests the receiver held: ${held.length}`],
      data: { store, writes, rounds: rows },
    }
  },
})
