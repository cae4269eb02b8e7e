/**
 * key-timing: does refusing an unknown keyId take as long as refusing a known keyId with a
 * wrong secret (SPEC §7.3)? One node on a scratch PostgreSQL database (or `--store
 * embedded`), in this process, listening; one keep-alive client sends, one at a time, pairs
 * of POST /rest/v1/auth/token — one with a made-up keyId, one with the real keyId and a wrong
 * secret, in random order within each pair — and times each answer. Prints the median and
 * quartiles of both, and their gap.
 *
 * The failure limit is turned off for the run (AUTH_FAILURE_LIMIT=0): every request here fails.
 */
import { Agent, request } from 'node:http'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/logger.js'
import { createScratchDatabase } from '../../test/support/databases.js'
import { choice, common, number } from '../lib/args.js'
import { defineScenario } from '../lib/scenario.js'

const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef'

export default defineScenario({
  name: 'key-timing',
  description: 'refusing an unknown keyId vs a known keyId with a wrong secret: the same time (median gap), in process',
  options: {
    samples: number('interleaved pairs timed', { default: 5000, smoke: 50 }),
    warmUpPairs: number('pairs sent before the timed ones', { default: 500, smoke: 10 }),
    store: choice("the node's store: a scratch database on --pg-url, or the embedded store in memory", ['pg', 'embedded'], 'pg'),
    pgUrl: common.pgUrl(),
  },
  smoke: true,
  async run(ctx) {
    const { samples, warmUpPairs, store } = ctx.opts
    const database = store === 'pg' ? await createScratchDatabase(ctx.opts.pgUrl, 'bench_key_timing') : undefined
    if (database) ctx.defer(() => database.drop())
    const config = loadConfig({
      ...(database ? { DATABASE_URL: database.url } : { DATA_DIR: 'memory://' }),
      ADMIN_TOKEN,
      JWT_SECRET: 'bench-jwt-secret-that-is-at-least-32-bytes-long',
      SEED_DEMO: 'false',
      LOG_LEVEL: 'silent',
      AUTH_FAILURE_LIMIT: '0',
    })
    const { app } = await buildApp(config, { logger: createLogger(config) })
    ctx.defer(() => app.close())
    await app.listen({ port: 0, host: '127.0.0.1' })
    const port = (app.server.address() as { port: number }).port
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    ctx.defer(() => agent.destroy())

    const call = (method: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: string; micros: number }> => {
      const payload = JSON.stringify(body)
      return new Promise((resolve, reject) => {
        const started = process.hrtime.bigint()
        const req = request({ host: '127.0.0.1', port, method, path, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers } }, (res) => {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => (text += chunk))
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, micros: Number(process.hrtime.bigint() - started) / 1000 }))
        })
        req.on('error', reject)
        req.end(payload)
      })
    }

    const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }
    const company = JSON.parse((await call('POST', '/admin/v1/companies', { name: 'Timing' }, admin)).body)
    await call('POST', `/admin/v1/companies/${company.id}/agents`, { name: 'Agent' }, admin)
    const key = JSON.parse((await call('POST', `/admin/v1/companies/${company.id}/api-keys`, { name: 'timing' }, admin)).body)
    // A busy node has its keys cached: one good call puts this one there.
    const good = await call('POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: 'timing-user' })
    if (good.status !== 200) throw new Error(`setup: ${good.status} ${good.body}`)

    const madeUpKeyId = (i: number) => `ak_${Buffer.from(`unknown-${i}-${Math.random()}`).toString('base64url').slice(0, 16)}`
    const unknown: number[] = []
    const wrongSecret: number[] = []
    for (let i = 0; i < warmUpPairs + samples; i++) {
      const attempts: Array<[number[], () => ReturnType<typeof call>]> = [
        [unknown, () => call('POST', '/rest/v1/auth/token', { keyId: madeUpKeyId(i), keySecret: 'sk_wrong_secret_wrong_secret_wrong', userId: 'timing-user' })],
        [wrongSecret, () => call('POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: 'sk_wrong_secret_wrong_secret_wrong', userId: 'timing-user' })],
      ]
      if (Math.random() < 0.5) attempts.reverse()
      for (const [into, attempt] of attempts) {
        const answer = await attempt()
        if (answer.status !== 401) throw new Error(`expected 401, got ${answer.status} ${answer.body}`)
        if (i >= warmUpPairs) into.push(answer.micros)
      }
    }

    const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
    const row = (label: string, values: number[]) => {
      const sorted = [...values].sort((a, b) => a - b)
      return [label, quantile(sorted, 0.5).toFixed(0), quantile(sorted, 0.25).toFixed(0), quantile(sorted, 0.75).toFixed(0)]
    }
    const median = (values: number[]) => quantile([...values].sort((a, b) => a - b), 0.5)
    return {
      scenario: 'key-timing',
      title: `key-timing: store ${store}, ${samples} interleaved samples of each (after ${warmUpPairs} warm-up pairs), µs per answer`,
      tables: [{ headers: ['', 'median', 'p25', 'p75'], rows: [row('unknown keyId', unknown), row('known keyId, wrong secret', wrongSecret)] }],
      lines: [`median gap (unknown − wrong secret): ${(median(unknown) - median(wrongSecret)).toFixed(0)} µs (${((median(unknown) / median(wrongSecret) - 1) * 100).toFixed(1)} %)`],
      data: { store, samples, unknown, wrongSecret },
    }
  },
})
