/**
 * `recovery` and `cold-start`: what a Redis blip and a joining node cost a node under load.
 *
 *   node dist/bench/recovery.js [--users 200000] [--duration 12] [--kill-at 4] [--host FILE]
 *   node dist/bench/recovery.js --cold-start [--users 200000]
 *
 * recovery: one node on a scratch PostgreSQL database and Redis, every user cached (one
 * verification each), then saturating verifications round-robin over the first `--hot`
 * users (20,000: the verified-token cache of src/jwt/keyring.ts holds 20,000, so the load
 * measures the user cache, not HMAC) for
 * `--duration` s; at `--kill-at` s the node's subscriber connection is killed
 * (`CLIENT KILL TYPE pubsub`, what a Redis restart, failover or network blip does).
 * Reports responses per 500 ms window, the median window before the kill, the worst one
 * after it, how long until windows are back to ≥ 0.9× that median, 503s and wrong answers
 * (every token is valid: anything but 200 is wrong).
 *
 * cold-start: a warm node serves the same load; a second node (empty cache) joins and gets
 * half the connections; reports how long until the new node's 500 ms windows reach 0.9× the
 * warm node's median.
 *
 * `--host FILE` runs another build's bench/node-host.js (to measure a before and an after
 * in one sitting).
 */
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { Redis } from 'ioredis'
import { createPostgresDb } from '../src/store/db.js'
import { layoutFor, prepareSql, sqlDataset, stableStart, type Dataset } from './lib/data.js'
import { runLoad, type Workload } from './lib/load.js'
import { DIST, freePort, startProcess, type Proc } from './lib/procs.js'
import { createScratchDatabase } from '../test/support/databases.js'

const WINDOW_MS = 500

const { values: args } = parseArgs({
  options: {
    users: { type: 'string', default: '200000' },
    hot: { type: 'string', default: '20000' },
    duration: { type: 'string', default: '12' },
    'kill-at': { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
    'pg-url': { type: 'string', default: 'postgres://root@127.0.0.1:5432/postgres' },
    'redis-url': { type: 'string', default: 'redis://127.0.0.1:6379' },
    host: { type: 'string' },
    'cold-start': { type: 'boolean', default: false },
    env: { type: 'string', multiple: true },
    json: { type: 'string' },
  },
})

export interface Windows {
  /** responses per 500 ms window, from the start of the load */
  counts: number[]
  statuses: Record<string, number>
}

export interface RecoveryResult {
  users: number
  windowsPerS: number[]
  killAtS: number
  medianBefore: number
  worstAfter: number
  worstRatio: number
  /** seconds from the kill until every later window is ≥ 0.9× the median before */
  backTo90S: number | undefined
  non200: Record<string, number>
  wrong: number
  /** from the kill to the end of the run: user-cache misses (store reads), cache flushes, catch-ups */
  afterKill: { userMisses: number; epochs: number; catchUps: number } | undefined
  /** from the kill until the node's /metrics said its cache was trusted again (polled every 10 ms) */
  untrustedMs: number | undefined
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length ? sorted[Math.floor(sorted.length / 2)]! : 0
}

/** Round-robin over the hot users (verify-hot), counting answers per window; anything but 200 is wrong. */
function roundRobin(ds: Dataset, windows: Windows, startedAt: () => number): Workload {
  const start = stableStart(ds.layout)
  const headers = Array.from({ length: ds.layout.hot }, (_, i) => ({ authorization: 'Bearer ' + ds.token(start + i) }))
  let n = 0
  return {
    next: () => ({ method: 'GET', path: '/rest/v1/auth/verify', headers: headers[n++ % headers.length]! }),
    check: (_slot, status) => {
      const w = Math.floor((performance.now() - startedAt()) / WINDOW_MS)
      windows.counts[w] = (windows.counts[w] ?? 0) + 1
      if (status !== 200) windows.statuses[status] = (windows.statuses[status] ?? 0) + 1
      return status === 200
    },
  }
}

/** The node's counters that tell a flush from a catch-up: user-cache misses, epochs, catch-ups. */
async function counters(node: Proc): Promise<{ userMisses: number; epochs: number; catchUps: number }> {
  const text = await (await fetch(node.url + '/metrics')).text()
  const sum = (re: RegExp) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0)
  return {
    userMisses: sum(/^chat_auth_cache_misses_total\{cache="users"\} (\d+)/gm),
    epochs: sum(/^chat_auth_bus_epoch_changes_total\{[^}]*\} (\d+)/gm),
    catchUps: sum(/^chat_auth_bus_catch_ups_total\{outcome="complete"\} (\d+)/gm),
  }
}

/** One verification per user (`hotOnly`: per hot user), so the node caches them. */
async function fill(node: Proc, ds: Dataset, hotOnly = false): Promise<void> {
  const start = stableStart(ds.layout)
  const end = hotOnly ? start + ds.layout.hot : ds.layout.users
  let i = start
  const fillAll: Workload = { next: () => ({ method: 'GET', path: '/rest/v1/auth/verify', headers: { authorization: 'Bearer ' + ds.token(i < end ? i++ : start) } }) }
  await runLoad(fillAll, { label: `fill ${node.name}`, urls: [node.url], connections: 20, durationS: 600, amount: end - start })
}

async function main(): Promise<void> {
  const users = Number(args.users)
  const durationS = Number(args.duration)
  const killAtS = Number(args['kill-at'])
  const connections = Number(args.connections)
  const host = args.host ?? DIST + 'bench/node-host.js'
  const jwtSecret = randomBytes(32).toString('base64url')
  const prefix = 'bench-recovery-' + randomBytes(4).toString('hex')
  const scratch = await createScratchDatabase(args['pg-url'], 'bench_recovery')
  const db = createPostgresDb(scratch.url)
  const nodes: Proc[] = []
  const redis = new Redis(args['redis-url'])
  try {
    const layout = layoutFor(users, Number(args.hot), 0, 0)
    process.stderr.write(`preparing ${users.toLocaleString('en-US')} users…\n`)
    const prepared = await prepareSql(db, layout)
    const ds = sqlDataset(prepared, layout, jwtSecret)
    const extraEnv = Object.fromEntries((args.env ?? []).map((kv) => kv.split('=', 2) as [string, string]))
    const startNode = async (name: string) =>
      startProcess({
        name,
        script: host,
        nodeFlags: ['--expose-gc'],
        env: {
          DATABASE_URL: scratch.url,
          REDIS_URL: args['redis-url'],
          REDIS_PREFIX: prefix,
          JWT_SECRET: jwtSecret,
          ADMIN_TOKEN: 'bench-admin-token-' + randomBytes(8).toString('hex'),
          LOG_LEVEL: 'warn',
          SEED_DEMO: 'false',
          CACHE_SIZE: String(Math.max(1_000_000, users)),
          ...extraEnv,
        },
        port: await freePort(),
        readyPath: '/readyz',
        ipc: true,
      })
    nodes.push(await startNode('warm'))
    await fill(nodes[0]!, ds, args['cold-start'])

    const windows: Windows = { counts: [], statuses: {} }
    let startedAt = performance.now()
    if (!args['cold-start']) {
      let atKill: Awaited<ReturnType<typeof counters>> | undefined
      let untrustedMs: number | undefined
      const kill = setTimeout(() => {
        void counters(nodes[0]!).then((c) => (atKill = c))
        void redis.client('KILL', 'TYPE', 'pubsub').then(async (n) => {
          const killedAt = performance.now()
          process.stderr.write(`  killed ${String(n)} subscriber connection(s) at ${((killedAt - startedAt) / 1000).toFixed(2)} s\n`)
          // how long the node served without trusting its cache (every request read the store)
          await new Promise((resolve) => setTimeout(resolve, 5))
          while (performance.now() - killedAt < 5000 && !/^chat_auth_cache_trusted 1$/m.test(await (await fetch(nodes[0]!.url + '/metrics')).text())) await new Promise((resolve) => setTimeout(resolve, 10))
          untrustedMs = performance.now() - killedAt
        })
      }, killAtS * 1000)
      startedAt = performance.now()
      const run = await runLoad(roundRobin(ds, windows, () => startedAt), { label: 'recovery', urls: [nodes[0]!.url], connections, durationS })
      clearTimeout(kill)
      const atEnd = await counters(nodes[0]!)
      const delta = atKill && { userMisses: atEnd.userMisses - atKill.userMisses, epochs: atEnd.epochs - atKill.epochs, catchUps: atEnd.catchUps - atKill.catchUps }
      const perS = windows.counts.map((c) => (c ?? 0) * (1000 / WINDOW_MS))
      const killWindow = Math.floor((killAtS * 1000) / WINDOW_MS)
      // the first second is warm-up; the last window is partial
      const before = perS.slice(2, killWindow)
      const after = perS.slice(killWindow, Math.floor((durationS * 1000) / WINDOW_MS))
      const medianBefore = median(before)
      const worstAfter = Math.min(...after)
      const lastLow = after.reduce((last, v, i) => (v < 0.9 * medianBefore ? i : last), -1)
      const result: RecoveryResult = {
        users,
        windowsPerS: perS,
        killAtS,
        medianBefore,
        worstAfter,
        worstRatio: worstAfter / medianBefore,
        backTo90S: lastLow === after.length - 1 ? undefined : ((lastLow + 1) * WINDOW_MS) / 1000,
        non200: windows.statuses,
        wrong: run.wrong,
        afterKill: delta,
        untrustedMs,
      }
      process.stdout.write(
        `recovery, ${users.toLocaleString('en-US')} cached users, verify-hot over ${layout.hot.toLocaleString('en-US')} of them, ${connections} connections, subscriber killed at ${killAtS} s\n` +
          `  req/s per 500 ms: ${perS.map((v) => Math.round(v)).join(' ')}\n` +
          `  median before the kill ${Math.round(medianBefore)}/s; worst window after it ${Math.round(worstAfter)}/s (${result.worstRatio.toFixed(2)}×); ` +
          `back to ≥ 0.9× ${result.backTo90S === undefined ? 'never within the run' : `${result.backTo90S.toFixed(1)} s after the kill`}\n` +
          `  non-200: ${JSON.stringify(result.non200)} (503s: ${result.non200['503'] ?? 0}); wrong answers: ${result.wrong}; errors ${run.errors}\n` +
          `  cache untrusted for ${untrustedMs === undefined ? '?' : `≤ ${Math.round(untrustedMs)} ms`} after the kill (polled)\n` +
          `  after the kill: ${delta ? `${delta.userMisses} user-cache misses (store reads), ${delta.epochs} cache flushes, ${delta.catchUps} catch-ups` : 'node counters not read'}\n`,
      )
      if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 2))
      return
    }

    // cold-start: the warm node alone for a while, then a new node joins and takes half the connections.
    const warmWindows: Windows = { counts: [], statuses: {} }
    const joinAtS = 3
    startedAt = performance.now()
    const warmRun = runLoad(roundRobin(ds, warmWindows, () => startedAt), { label: 'cold-start: warm node', urls: [nodes[0]!.url], connections: Math.ceil(connections / 2), durationS, progress: null })
    await new Promise((resolve) => setTimeout(resolve, joinAtS * 1000))
    const joinStart = performance.now()
    nodes.push(await startNode('new'))
    const readyS = (performance.now() - joinStart) / 1000
    const newStartedAt = performance.now()
    const newRun = await runLoad(roundRobin(ds, windows, () => newStartedAt), { label: 'cold-start: new node', urls: [nodes[1]!.url], connections: Math.floor(connections / 2), durationS: Math.max(2, durationS - joinAtS - readyS) })
    await warmRun
    const warmPerS = warmWindows.counts.map((c) => (c ?? 0) * 2)
    const newPerS = windows.counts.map((c) => (c ?? 0) * 2)
    // Compared window by window with the warm node at the same time: both share the machine.
    const offset = Math.round((newStartedAt - startedAt) / WINDOW_MS)
    const ratios = newPerS.map((v, j) => v / Math.max(1, warmPerS[j + offset] ?? 0))
    const firstGood = ratios.findIndex((r, j) => r >= 0.9 && j < ratios.length - 1)
    process.stdout.write(
      `cold-start, ${users.toLocaleString('en-US')} users (the warm node caches the ${layout.hot.toLocaleString('en-US')} hot ones), ${connections} connections split over a warm and a joining node${extraEnv.WARM_UP_USERS ? `, WARM_UP_USERS=${extraEnv.WARM_UP_USERS}` : ''}\n` +
        `  new node: /readyz 200 after ${readyS.toFixed(1)} s; req/s per 500 ms: ${newPerS.map((v) => Math.round(v)).join(' ')}\n` +
        `  warm node, same windows:              ${newPerS.map((_, j) => Math.round(warmPerS[j + offset] ?? 0)).join(' ')}\n` +
        `  new node at ≥ 0.9× the warm node: ${firstGood < 0 ? 'never within the run' : `${((firstGood * WINDOW_MS) / 1000 + readyS).toFixed(1)} s after it started`}\n` +
        `  wrong answers: ${newRun.wrong + (await warmRun).wrong}\n`,
    )
  } finally {
    await Promise.allSettled(nodes.map((n) => n.stop()))
    redis.disconnect()
    await db.close()
    await scratch.drop()
  }
}

await main()
