/**
 * What `recovery` and `cold-start` share: a scratch PostgreSQL database and Redis of their
 * own, SQL-prepared users, nodes (bench/node-host.ts, or another build's) on them, and
 * verify-hot counted per 500 ms window.
 */
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { createPostgresDb } from '../../src/store/db.js'
import { createScratchDatabase, pgReachable } from '../../test/support/databases.js'
import { common, list } from './args.js'
import { layoutFor, prepareSql, sqlDataset, stableStart, type Dataset } from './data.js'
import { runLoad, type Workload } from './load.js'
import { DIST, freePort, startProcess, type Proc } from './procs.js'
import { Skip, type Context } from './scenario.js'

export const WINDOW_MS = 500

export const RIG_OPTIONS = {
  users: common.users(200_000, 300),
  hot: { ...common.hot(20_000, 200), help: "verify-hot's working set (20,000: what the keyring's verified-token cache holds, so the load measures the user cache, not HMAC)" },
  connections: common.connections(50, 10),
  pgUrl: common.pgUrl(),
  redisUrl: common.redisUrl(),
  host: common.host(),
  env: list('NAME=VALUE: a variable of the nodes, e.g. WARM_UP_USERS=20000'),
}

export interface Windows {
  /** responses per 500 ms window, from the start of the load */
  counts: number[]
  statuses: Record<string, number>
}

/** The middle value (the upper one of two), 0 when empty: recovery's own median. */
export function windowMedian(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length ? sorted[Math.floor(sorted.length / 2)]! : 0
}

/** Round-robin over the hot users (verify-hot), counting answers per window; anything but 200 is wrong. */
export function roundRobin(ds: Dataset, windows: Windows, startedAt: () => number): Workload {
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

export interface Rig {
  ds: Dataset
  extraEnv: Record<string, string>
  startNode(name: string): Promise<Proc>
  /** One verification per user (`hotOnly`: per hot user), so the node caches them. */
  fill(node: Proc, hotOnly?: boolean): Promise<void>
}

type RigValues = { users: number; hot: number; pgUrl: string; redisUrl: string; host: string | undefined; env: string[] }

/** The database, Redis prefix and users; everything it starts is stopped and dropped when the scenario ends. */
export async function openRig(ctx: Context<RigValues>): Promise<Rig> {
  const { users, hot, pgUrl, redisUrl, env } = ctx.opts
  if (!(await pgReachable(pgUrl))) throw new Skip(`PostgreSQL not reachable at ${pgUrl}`)
  const { Redis } = await import('ioredis')
  const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
  const redisOk = await probe.connect().then(() => probe.ping()).then(() => true, () => false)
  probe.disconnect()
  if (!redisOk) throw new Skip(`Redis not reachable at ${redisUrl}`)
  const host = ctx.opts.host ?? DIST + 'bench/node-host.js'
  const jwtSecret = randomBytes(32).toString('base64url')
  const prefix = 'bench-recovery-' + randomBytes(4).toString('hex')
  const scratch = await createScratchDatabase(pgUrl, 'bench_recovery')
  ctx.defer(() => scratch.drop())
  const db = createPostgresDb(scratch.url)
  const layout = layoutFor(users, hot, 0, 0)
  ctx.log(`preparing ${users.toLocaleString('en-US')} users…`)
  const prepared = await prepareSql(db, layout).finally(() => db.close())
  const ds = sqlDataset(prepared, layout, jwtSecret)
  const extraEnv = Object.fromEntries(env.map((kv) => kv.split('=', 2) as [string, string]))
  return {
    ds,
    extraEnv,
    async startNode(name) {
      const node = await startProcess({
        name,
        script: host,
        nodeFlags: ['--expose-gc'],
        env: {
          DATABASE_URL: scratch.url,
          REDIS_URL: redisUrl,
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
      ctx.watch(node)
      ctx.defer(() => node.stop())
      return node
    },
    async fill(node, hotOnly = false) {
      const start = stableStart(ds.layout)
      const end = hotOnly ? start + ds.layout.hot : ds.layout.users
      let i = start
      const fillAll: Workload = { next: () => ({ method: 'GET', path: '/rest/v1/auth/verify', headers: { authorization: 'Bearer ' + ds.token(i < end ? i++ : start) } }) }
      await runLoad(fillAll, { label: `fill ${node.name}`, urls: [node.url], connections: 20, durationS: 600, amount: end - start })
    },
  }
}
