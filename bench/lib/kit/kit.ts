/**
 * The shared deployment of the kit's parts (bench/scenarios/verify-hot.ts, mixed.ts, …): one
 * node on a scratch PostgreSQL database (or the embedded store, or a running deployment
 * under --url), one data set, and the baselines every result is a ratio to, each a process
 * of its own fed the very same requests (bench/baselines/server.ts).
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { createPgliteDb, createPostgresDb, type Db } from '../../../src/store/db.js'
import { createScratchDatabase, pgReachable, type ScratchDatabase } from '../../../test/support/databases.js'
import type { Values } from '../args.js'
import { BENCH_NEW_USER_LIMITS, copyUsers, layoutFor, prepareApi, prepareSql, sqlDataset, stableStart, type Dataset, type Layout, type SqlPrepared } from '../data.js'
import { runLoad, type LoadResult, type Workload } from '../load.js'
import { cpuSeconds, DIST, freePort, mainThreadCpuSeconds, startProcess, type Proc } from '../procs.js'
import { median, summarizeRuns, type Summary } from '../report.js'
import type { Context } from '../scenario.js'
import { invalidate, issueMixedOnce, type MixedStats } from '../workloads.js'
import type { KIT_OPTIONS } from './options.js'

export type KitOptions = Values<typeof KIT_OPTIONS>

export interface FillResult {
  rps: number
  p99: number
  cached?: number
  rssMb?: number
  peakRssMb?: number
  rssEmptyMb?: number
  rssAfterGcMb?: number
  heapLiveMb?: number
  heapBeforeGcMb?: number
  heapTotalMb?: number
  liveBytesPerUser?: number
}

export interface ClusterEntry {
  nodes: number
  results: LoadResult[]
  stats: MixedStats[]
}

/** What the parts leave beside the load results, for their rows, targets and the JSON. */
export interface KitRecord {
  /** verify-hot's fixed offered rate */
  latencyRate?: number
  /** verify-cold's node cache */
  coldCacheSize?: number
  fill?: FillResult
  mixed: MixedStats[]
  cluster: ClusterEntry[]
  notes: string[]
}

/** What a part's rows and targets read. */
export interface KitView {
  results: Record<string, LoadResult[]>
  rss: Record<string, number[]>
  record: KitRecord
  connections: number
  /** medians over rounds of one key */
  s(key: string): Summary | undefined
  /** each of `key`'s rounds over the bare round of the same round; undefined unless both ran every round, at least two */
  roundRatios(key: string): number[] | undefined
  /** " (median of per-round ratios 0.97×)", beside a target's ratio of medians */
  pairedRatio(key: string): string
}

export class Kit implements KitView {
  readonly results: Record<string, LoadResult[]> = {}
  readonly rss: Record<string, number[]> = {}
  readonly record: KitRecord = { mixed: [], cluster: [], notes: [] }
  readonly procs: Proc[] = []
  readonly remote: boolean
  readonly store: 'pg' | 'embedded'
  readonly adminToken: string
  readonly jwtSecret = randomBytes(48).toString('base64url')
  readonly layout: Layout
  readonly prepare: 'api' | 'sql'
  ds!: Dataset
  prepared: SqlPrepared | undefined
  scratch: ScratchDatabase | undefined
  /** the node under test; undefined once a part replaced or stopped it */
  main: Proc | undefined
  urls: string[] = []
  bare!: Proc
  naive: Proc | undefined
  update: Proc | undefined
  /** bare Fastify sending the node's own verify answer (verify-hot's, bench/baselines/server.ts answer) */
  answer: Proc | undefined
  /** scenarios a part found it could not run here, and why */
  readonly skipped: Record<string, string> = {}
  private dataDir: string | undefined
  private readonly mainEnv: Record<string, string | undefined>
  private readonly nodeFlags: string[]

  constructor(
    readonly ctx: Context<unknown>,
    readonly opts: KitOptions,
    /** the parts' wishes: data prepared with SQL, variables of the node under test */
    wishes: { needsSql: boolean; mainEnv: Record<string, string | undefined> },
  ) {
    this.mainEnv = wishes.mainEnv
    this.remote = opts.url.length > 0
    this.store = opts.store
    this.adminToken = opts.adminToken ?? 'adm_' + randomBytes(24).toString('base64url')
    this.layout = layoutFor(opts.users, opts.hot)
    this.prepare = opts.prepare !== 'auto' ? opts.prepare : this.remote || (opts.users <= 20_000 && !wishes.needsSql) ? 'api' : 'sql'
    if (this.remote && this.prepare === 'sql') throw new Error('--prepare sql writes into the store directly: only for nodes the kit starts')
    const profDir = join(process.cwd(), 'bench-profiles')
    this.nodeFlags = [...(opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []), ...(opts.nodeOptions?.split(/\s+/).filter(Boolean) ?? [])]
  }

  get connections(): number {
    return this.opts.connections
  }

  log(line: string): void {
    this.ctx.log(line)
  }

  /** A part that cannot run here: said in the deployment's notes and in the report's skipped list. */
  skip(scenario: string, reason: string): void {
    this.skipped[scenario] = reason
    this.record.notes.push(`${scenario} not measured: ${reason}`)
  }

  /** The scratch database, the data, the node under test and the baselines. */
  async open(): Promise<void> {
    const { opts } = this
    const pgOk = await pgReachable(opts.pgUrl)
    if (!pgOk && this.store === 'pg') throw new Error(`PostgreSQL is not reachable at ${opts.pgUrl}: use --store embedded or --pg-url`)
    this.scratch = pgOk ? await createScratchDatabase(opts.pgUrl, 'bench') : undefined
    const scratch = this.scratch
    if (scratch && !opts.keep) this.ctx.defer(() => scratch.drop())
    if (scratch) this.log(`scratch database ${scratch.name}`)
    this.ctx.defer(async () => {
      for (const p of this.procs.splice(0)) await p.stop().catch(() => {})
    })
    await this.prepareData()
    await this.startBaselines()
  }

  private async prepareData(): Promise<void> {
    const { opts, layout } = this
    if (this.remote) {
      this.urls = opts.url
      this.log(`preparing ${layout.users.toLocaleString('en-US')} users through the API of ${this.urls[0]}`)
      this.ds = await prepareApi({ url: this.urls[0]!, adminToken: opts.adminToken, keyId: opts.keyId, keySecret: opts.keySecret }, layout, progress('prepare'))
      return
    }
    if (this.store === 'embedded') {
      const dataDir = (this.dataDir = mkdtempSync(join(tmpdir(), 'bench-data-')))
      if (!opts.keep) this.ctx.defer(() => rmSync(dataDir, { recursive: true, force: true }))
    }
    if (this.prepare === 'sql') {
      this.log(`preparing ${layout.users.toLocaleString('en-US')} users with INSERT … SELECT generate_series (${this.store})`)
      const db: Db = this.store === 'pg' ? createPostgresDb(this.scratch!.url, { statementTimeoutMs: 600_000 }) : await createPgliteDb(this.dataDir!)
      const started = Date.now()
      this.prepared = await prepareSql(db, layout, (n) => progress('insert')('users', n))
      await db.close()
      this.log(`  ${layout.users.toLocaleString('en-US')} users in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    }
    this.main = await this.startNode('node', {
      CACHE_SIZE: String(opts.cacheSize),
      REDIS_URL: opts.redis ? opts.redisUrl : undefined,
      ...this.mainEnv,
    })
    this.urls = [this.main.url]
    if (this.prepared) {
      const started = Date.now()
      this.ds = sqlDataset(this.prepared, layout, this.jwtSecret)
      this.log(`  signed ${(layout.hot + 2 * layout.mixed).toLocaleString('en-US')} tokens in ${((Date.now() - started) / 1000).toFixed(1)} s (colder ones are signed when drawn)`)
    } else {
      this.log(`preparing ${layout.users.toLocaleString('en-US')} users through the admin and public API`)
      const started = Date.now()
      this.ds = await prepareApi({ url: this.main.url, adminToken: this.adminToken }, layout, progress('prepare'))
      this.log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    }
  }

  /** The baselines, started side by side (each start is mostly waiting), all settled before a failed one fails the run. */
  private async startBaselines(): Promise<void> {
    const { layout, ds, scratch } = this
    const start = stableStart(layout)
    const bareStarting = this.startBaseline('bare', {})
    let naiveStarting: Promise<Proc> | undefined
    let updateStarting: Promise<Proc> | undefined
    if (scratch) {
      if (this.remote || this.store === 'embedded') {
        // the rows the baselines read and write, copied into the scratch PostgreSQL database
        const db = createPostgresDb(scratch.url, { statementTimeoutMs: 600_000 })
        await copyUsers(db, ds, start, start + layout.hot)
        await copyUsers(db, ds, layout.mixed, layout.mixed + layout.invalidate)
        await db.close()
      }
      naiveStarting = this.startBaseline('naive', { DATABASE_URL: scratch.url, JWT_SECRET: this.jwtSecret })
      const updateEnv: Record<string, string> = { DATABASE_URL: scratch.url }
      if (this.store === 'embedded' && !this.remote) {
        // commits on the same kind of store as the node's: a PGlite copy of the invalidate range
        const liteDir = mkdtempSync(join(tmpdir(), 'bench-update-'))
        if (!this.opts.keep) this.ctx.defer(() => rmSync(liteDir, { recursive: true, force: true }))
        const lite = await createPgliteDb(liteDir)
        await copyUsers(lite, ds, layout.mixed, layout.mixed + layout.invalidate)
        await lite.close()
        updateEnv.PGLITE_DIR = liteDir
      }
      updateStarting = this.startBaseline('update', updateEnv)
      if (this.remote) this.record.notes.push("naive and update baselines ran on this machine against its PostgreSQL, not against the deployment's")
    } else {
      this.record.notes.push('no PostgreSQL reachable: naive-verifier and UPDATE baselines skipped')
    }
    const started = await Promise.allSettled([bareStarting, naiveStarting, updateStarting])
    for (const b of started) if (b.status === 'rejected') throw b.reason
    const [bare, naive, update] = started.map((b) => (b.status === 'fulfilled' ? b.value : undefined))
    this.bare = bare!
    this.naive = naive
    this.update = update
  }

  /** A baseline server (bench/baselines/server.ts `mode`), stopped with the deployment. */
  startBaseline(mode: 'bare' | 'naive' | 'update' | 'answer', env: Record<string, string>): Promise<Proc> {
    const starting = freePort().then((port) => startProcess({ name: mode, script: DIST + 'bench/baselines/server.js', args: [mode], env, port }))
    // kept even if another start fails first: what started is stopped at the end
    void starting.then((proc) => this.keep(proc), () => {})
    return starting
  }

  private keep(proc: Proc): Proc {
    this.procs.push(proc)
    this.ctx.watch(proc)
    return proc
  }

  /** A node as `chat-auth serve` starts it, plus the kit's GC/heap probe on an IPC channel (bench/node-host.ts). */
  async startNode(name: string, extra: Record<string, string | undefined>): Promise<Proc> {
    const proc = await startProcess({
      name,
      script: DIST + 'bench/node-host.js',
      nodeFlags: ['--expose-gc', ...this.nodeFlags],
      ipc: true,
      env: {
        ADMIN_TOKEN: this.adminToken,
        JWT_SECRET: this.jwtSecret,
        LOG_LEVEL: 'warn',
        SEED_DEMO: 'false',
        ...BENCH_NEW_USER_LIMITS,
        ...(this.store === 'pg' ? { DATABASE_URL: this.scratch!.url } : { DATA_DIR: this.dataDir }),
        ...extra,
      },
      port: await freePort(),
      readyPath: '/readyz',
    })
    return this.keep(proc)
  }

  async stopProc(proc: Proc): Promise<void> {
    await proc.stop()
    const i = this.procs.indexOf(proc)
    if (i >= 0) this.procs.splice(i, 1)
  }

  load(label: string, workload: Workload, target: string[], durationS: number, rate?: number): Promise<LoadResult> {
    return runLoad(workload, { label, urls: target, connections: this.opts.connections, durationS, rate, progress: process.stderr })
  }

  /**
   * One measured run under `key` (after a warm-up): the generator's and the server's CPU
   * beside the load result, since on a machine of few cores the generator competes with the
   * server and what each used says which one bounded the run.
   */
  async measured(key: string, label: string, make: () => Workload, target: string[], proc?: Proc, rate?: number): Promise<LoadResult> {
    const { opts } = this
    const workload = make()
    if (opts.warmup > 0) await this.load(`${label} (warm-up)`, workload, target, opts.warmup, rate)
    await workload.settle?.()
    workload.reset?.()
    const started = performance.now()
    const generatorBefore = process.cpuUsage()
    const serverBefore = proc ? cpuSeconds(proc.pid) : undefined
    const serverMainBefore = proc ? mainThreadCpuSeconds(proc.pid) : undefined
    const result = await this.load(label, workload, target, opts.duration, rate)
    const wallS = (performance.now() - started) / 1000
    const generator = process.cpuUsage(generatorBefore)
    const serverAfter = proc ? cpuSeconds(proc.pid) : undefined
    const serverMainAfter = proc ? mainThreadCpuSeconds(proc.pid) : undefined
    const perSecond = (before: number | undefined, after: number | undefined) => (before === undefined || after === undefined ? undefined : (after - before) / wallS)
    result.cpu = {
      generator: (generator.user + generator.system) / 1e6 / wallS,
      server: perSecond(serverBefore, serverAfter),
      serverMain: perSecond(serverMainBefore, serverMainAfter),
    }
    await workload.settle?.()
    ;(this.results[key] ??= []).push(result)
    this.rssOf(key, proc)
    return result
  }

  private updateRounds = new Set<number>()

  /** The plain UPDATE baseline, once in round `round` however many parts compare with it. */
  async measureUpdateOnce(round: number): Promise<void> {
    if (!this.update || this.updateRounds.has(round)) return
    this.updateRounds.add(round)
    await this.measured('update', `plain UPDATE r${round}`, () => invalidate(this.ds), [this.update.url], this.update)
  }

  rssOf(label: string, proc: Proc | undefined): void {
    const value = proc?.rssMb()
    if (value !== undefined) (this.rss[label] ??= []).push(value)
  }

  /** The node knows the mixed users as it knows anyone who had a token (workloads.ts issueMixedOnce). */
  async primeMixed(target: string): Promise<void> {
    const primed = await runLoad(issueMixedOnce(this.ds), { label: 'mixed users: one token each', urls: [target], connections: this.opts.connections, durationS: 3600, amount: this.layout.mixed, progress: process.stderr })
    const refused = primed.responses - (primed.statuses['200'] ?? 0)
    if (refused > 0 || primed.errors > 0) throw new Error(`a token for a mixed user was refused (${JSON.stringify(primed.statuses)}, ${primed.errors} errors)`)
  }

  /** The store's version of a user, through the admin API (the mixed model's resync); undefined without an admin token. */
  get readVersion(): ((userId: string) => Promise<number | undefined>) | undefined {
    if (this.remote && !this.opts.adminToken) return undefined
    return async (userId) => {
      const adminUrl = (this.main ?? this.procs.find((p) => p.name.startsWith('node')))?.url ?? this.urls[0]!
      const response = await fetch(`${adminUrl}/admin/v1/customer-users/${userId}`, { headers: { authorization: `Bearer ${this.adminToken}` } })
      if (response.status !== 200) return undefined
      return ((await response.json()) as { tokenVersion: number }).tokenVersion
    }
  }

  s(key: string): Summary | undefined {
    return summarizeRuns(this.results[key])
  }

  roundRatios(key: string): number[] | undefined {
    const bare = this.results.bare
    const runs = this.results[key]
    if (!bare || !runs || runs.length !== bare.length || runs.length < 2) return undefined
    return runs.map((run, round) => run.rps / bare[round]!.rps)
  }

  /**
   * Beside a target's ratio of medians (what it is judged by), the median of each round's
   * ratio to its own bare round: the two part when the machine's speed moved between rounds
   * (the table of rounds says which).
   */
  pairedRatio(key: string): string {
    const ratios = this.roundRatios(key)
    return ratios ? ` (median of per-round ratios ${median(ratios).toFixed(2)}×)` : ''
  }
}

export function progress(label: string): (what: string, done: number) => void {
  return (what, done) => {
    const line = `  ${label}: ${done.toLocaleString('en-US')} ${what}`
    if (process.stderr.isTTY) process.stderr.write('\r' + line.padEnd(60))
    else if (done % 100_000 === 0 || done < 100_000) process.stderr.write(line + '\n')
  }
}

export function firstLine(error: unknown): string {
  return String(error instanceof Error ? error.message : error).split('\n')[0]!
}
