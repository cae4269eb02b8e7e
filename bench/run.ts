/**
 * The load-testing kit: `npm run bench` (see bench/README.md and --help).
 *
 * Starts its own deployment (one node on the machine's PostgreSQL, or the embedded store;
 * a cluster of nodes over Redis) or targets a running one (--url), prepares data, runs the
 * baselines and the scenarios in interleaved rounds with the same autocannon settings, and
 * prints one table of medians with every result as a ratio to the baselines.
 */
import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import * as os from 'node:os'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { createPgliteDb, createPostgresDb, type Db } from '../src/store/db.js'
import { BENCH_NEW_USER_LIMITS, copyUsers, layoutFor, prepareApi, prepareSql, sqlDataset, stableStart, type Dataset } from './lib/data.js'
import { runLoad, type LoadResult, type Workload } from './lib/load.js'
import { cpuSeconds, DIST, freePort, mainThreadCpuSeconds, startProcess, type Proc } from './lib/procs.js'
import { buildTable, type Report } from './lib/report.js'
import { proxiedChat, proxiesMissing, proxyTable, startProxyRig, type ProxyRig } from './lib/proxies.js'
import * as S from './lib/scenarios.js'
import { createScratchDatabase, pgReachable } from '../test/support/databases.js'
import type { MemoryResult } from './memory.js'

const DEFAULT_PG_ADMIN_URL = 'postgres://root@127.0.0.1:5432/postgres'

const HELP = `npm run bench -- [options]

Target (default: start our own nodes on this machine)
  --url URL              a running deployment (repeat for several nodes); needs --admin-token,
                         or --key-id and --key-secret (then users are made by issuing tokens)
  --admin-token T        admin token of --url
  --key-id K --key-secret S   an API key of --url
  --store pg|embedded    own node's store: a scratch database on the machine's PostgreSQL (default),
                         or the embedded PGlite store in a temporary DATA_DIR
  --pg-url URL           PostgreSQL server for scratch databases (${DEFAULT_PG_ADMIN_URL})
  --redis-url URL        Redis for the cluster scenario (redis://127.0.0.1:6379)
  --redis                run the single node on Redis too (default: in-process bus)
  --cluster N            nodes of the cluster scenario (default 3; 0 skips it)

Data
  --users N              users (default 200000); --hot N working set of verify-hot (10000)
  --prepare auto|api|sql api: admin API + one token call per user; sql: INSERT … SELECT
                         generate_series and tokens signed here (auto: api up to 20000 users or with --url)
  --cache-size N         users cached per node (1000000); --cold-cache-size N for verify-cold (users/10)

Load
  --connections N (50)  --duration S (5)  --warmup S (1)  --rounds N (3)
  --scenarios LIST       comma-separated, of: ${S.SCENARIOS.join(', ')} (default: all)
  --proxy-readme FILE    the proxy scenario runs the nginx and Caddy recipes of this README (default: the repository's)
  --rate-share F         the fixed-rate latency runs offer F × bare Fastify's req/s (0.5; 0 skips)
  --revocations N        after the rounds: revoke N tokens one by one and every token of the
                         company (through the API), then run bare and verify-hot again, with
                         hot tokens signed after that revoke (needs --prepare sql; 0 skips)
  --sessions N           after the rounds: open N sessions (openChatSession) on the node, one per
                         user outside the hot set, then run bare and verify-hot again (100000;
                         0 skips; needs --prepare sql and N users outside the hot set)
  --no-fill              skip filling the node's cache with every user (the RSS measurement)
  --memory-users N       users of the in-process heap measurement (1000000; 0 skips)
  --node-options "…"     extra node flags for the nodes under test (e.g. --max-old-space-size=384)
  --cpu-prof             start nodes with --cpu-prof (profiles in ./bench-profiles)
  --no-recovery          skip bench/recovery.ts (recovery: subscriber killed under verify-hot;
                         cold-start: a node joining a warm one), run after the table on pg + Redis

Output
  --json FILE            write every raw result as JSON
  --markdown             print the table as Markdown
  --smoke                a few seconds end to end: 300 users, 10 connections, 1 round of 0.5 s
                         after 0.05 s warm-up, 5,000 users and jtis in the heap measurement, no cluster
  --keep                 keep the scratch database and data directories
`

const { values: args } = parseArgs({
  options: {
    url: { type: 'string', multiple: true },
    'admin-token': { type: 'string' },
    'key-id': { type: 'string' },
    'key-secret': { type: 'string' },
    store: { type: 'string', default: 'pg' },
    'pg-url': { type: 'string', default: DEFAULT_PG_ADMIN_URL },
    'redis-url': { type: 'string', default: 'redis://127.0.0.1:6379' },
    redis: { type: 'boolean', default: false },
    cluster: { type: 'string' },
    users: { type: 'string' },
    hot: { type: 'string' },
    prepare: { type: 'string', default: 'auto' },
    'cache-size': { type: 'string' },
    'cold-cache-size': { type: 'string' },
    connections: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    rounds: { type: 'string' },
    revocations: { type: 'string' },
    sessions: { type: 'string' },
    scenarios: { type: 'string' },
    'no-fill': { type: 'boolean', default: false },
    'memory-users': { type: 'string' },
    'rate-share': { type: 'string' },
    'proxy-readme': { type: 'string' },
    'node-options': { type: 'string' },
    'cpu-prof': { type: 'boolean', default: false },
    'no-recovery': { type: 'boolean', default: false },
    json: { type: 'string' },
    markdown: { type: 'boolean', default: false },
    smoke: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
})

if (args.help) {
  process.stdout.write(HELP)
  process.exit(0)
}

const smoke = args.smoke
const num = (value: string | undefined, fallback: number) => (value === undefined ? fallback : Number(value))
const remote = args.url !== undefined && args.url.length > 0
const users = num(args.users, smoke ? 300 : 200_000)
const opts = {
  users,
  hot: num(args.hot, smoke ? 500 : 10_000),
  cacheSize: num(args['cache-size'], 1_000_000),
  coldCacheSize: num(args['cold-cache-size'], Math.max(100, Math.floor(users / 10))),
  connections: num(args.connections, smoke ? 10 : 50),
  duration: num(args.duration, smoke ? 0.5 : 5),
  warmup: num(args.warmup, smoke ? 0.05 : 1),
  rounds: num(args.rounds, smoke ? 1 : 3),
  cluster: num(args.cluster, smoke || remote ? 0 : 3),
  memoryUsers: num(args['memory-users'], smoke ? 5000 : 1_000_000),
  // unset: bench/memory.ts's own default, whose 2 s of CPU are too much for a smoke run
  memoryRevoked: smoke ? 5000 : undefined,
  fill: !args['no-fill'] && !remote,
  rateShare: num(args['rate-share'], smoke ? 0 : 0.5),
  revocations: num(args.revocations, 0),
  sessions: num(args.sessions, smoke || remote ? 0 : 100_000),
  scenarios: (args.scenarios ?? S.SCENARIOS.join(',')).split(',').map((s) => s.trim()) as S.ScenarioName[],
}
for (const s of opts.scenarios) if (!(S.SCENARIOS as readonly string[]).includes(s)) throw new Error(`unknown scenario ${s}`)
// The revocations phase signs the dataset's tokens again: what other scenarios remember of it would be lost.
if (opts.revocations > 0 && (opts.scenarios.join() !== 'verify-hot' || opts.cluster > 0)) throw new Error('--revocations runs with --scenarios verify-hot --cluster 0 only')
const prepare: 'api' | 'sql' = args.prepare === 'api' || args.prepare === 'sql' ? args.prepare : remote || users <= 20_000 ? 'api' : 'sql'
if (remote && prepare === 'sql') throw new Error('--prepare sql writes into the store directly: only for nodes the kit starts')
const store = args.store === 'embedded' ? 'embedded' : 'pg'

const log = (line: string) => process.stderr.write(line + '\n')
const cleanups: Array<() => Promise<void>> = []
const procs: Proc[] = []
const results: Record<string, LoadResult[]> = {}
const rss: Record<string, number[]> = {}
const notes: string[] = []
const t0 = Date.now()

async function main(): Promise<void> {
  const adminToken = args['admin-token'] ?? 'adm_' + randomBytes(24).toString('base64url')
  const jwtSecret = randomBytes(48).toString('base64url')
  const pgOk = await pgReachable(args['pg-url']!)
  if (!pgOk && (store === 'pg' || !remote)) {
    if (store === 'pg') throw new Error(`PostgreSQL is not reachable at ${args['pg-url']}: use --store embedded or --pg-url`)
  }
  const scratch = pgOk ? await createScratchDatabase(args['pg-url']!, 'bench') : undefined
  if (scratch && !args.keep) cleanups.push(() => scratch.drop())
  if (scratch) log(`scratch database ${scratch.name}`)

  const layout = layoutFor(opts.users, opts.hot)
  const profDir = join(process.cwd(), 'bench-profiles')
  const nodeFlags = [...(args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []), ...(args['node-options']?.split(/\s+/).filter(Boolean) ?? [])]

  // ── the node(s) under test ──
  let dataDir: string | undefined
  const nodeEnv = (extra: Record<string, string | undefined>) => ({
    ADMIN_TOKEN: adminToken,
    JWT_SECRET: jwtSecret,
    LOG_LEVEL: 'warn',
    SEED_DEMO: 'false',
    ...BENCH_NEW_USER_LIMITS,
    ...(store === 'pg' ? { DATABASE_URL: scratch!.url } : { DATA_DIR: dataDir }),
    ...extra,
  })
  const startNode = async (name: string, extra: Record<string, string | undefined>): Promise<Proc> => {
    const proc = await startProcess({
      name,
      // `chat-auth serve` exactly, plus a GC/heap probe on an IPC channel (bench/node-host.ts)
      script: DIST + 'bench/node-host.js',
      nodeFlags: ['--expose-gc', ...nodeFlags],
      ipc: true,
      env: nodeEnv(extra),
      port: await freePort(),
      readyPath: '/readyz',
    })
    procs.push(proc)
    return proc
  }

  let ds: Dataset
  let main: Proc | undefined
  let urls: string[]
  let prepared: Awaited<ReturnType<typeof prepareSql>> | undefined
  if (remote) {
    urls = args.url!
    log(`preparing ${layout.users.toLocaleString('en-US')} users through the API of ${urls[0]}`)
    ds = await prepareApi({ url: urls[0]!, adminToken: args['admin-token'], keyId: args['key-id'], keySecret: args['key-secret'] }, layout, progress('prepare'))
  } else {
    if (store === 'embedded') {
      dataDir = mkdtempSync(join(tmpdir(), 'bench-data-'))
      if (!args.keep) cleanups.push(async () => rmSync(dataDir!, { recursive: true, force: true }))
    }
    if (prepare === 'sql') {
      log(`preparing ${layout.users.toLocaleString('en-US')} users with INSERT … SELECT generate_series (${store})`)
      const db: Db = store === 'pg' ? createPostgresDb(scratch!.url, { statementTimeoutMs: 600_000 }) : await createPgliteDb(dataDir!)
      const started = Date.now()
      prepared = await prepareSql(db, layout, (n) => progress('insert')('users', n))
      await db.close()
      log(`  ${layout.users.toLocaleString('en-US')} users in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    }
    main = await startNode('node', {
      CACHE_SIZE: String(opts.cacheSize),
      REDIS_URL: args.redis ? args['redis-url'] : undefined,
      // --revocations revokes in the dataset's one company: room for all of them.
      MAX_LIVE_TOKEN_REVOCATIONS: opts.revocations > 100_000 ? String(opts.revocations) : undefined,
    })
    urls = [main.url]
    if (prepared) {
      const started = Date.now()
      ds = sqlDataset(prepared, layout, jwtSecret)
      log(`  signed ${(layout.hot + 2 * layout.mixed).toLocaleString('en-US')} tokens in ${((Date.now() - started) / 1000).toFixed(1)} s (colder ones are signed when drawn)`)
    } else {
      log(`preparing ${layout.users.toLocaleString('en-US')} users through the admin and public API`)
      const started = Date.now()
      ds = await prepareApi({ url: main.url, adminToken }, layout, progress('prepare'))
      log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    }
  }
  // the store's version of a user, through the admin API (the mixed model's resync)
  const adminUrl = () => (main ?? procs.find((p) => p.name.startsWith('node')))?.url ?? urls[0]!
  const readVersion = remote && !args['admin-token']
    ? undefined
    : async (userId: string): Promise<number | undefined> => {
        const response = await fetch(`${adminUrl()}/admin/v1/customer-users/${userId}`, { headers: { authorization: `Bearer ${adminToken}` } })
        if (response.status !== 200) return undefined
        return ((await response.json()) as { tokenVersion: number }).tokenVersion
      }
  const rssOf = (label: string, proc: Proc | undefined) => {
    const value = proc?.rssMb()
    if (value !== undefined) (rss[label] ??= []).push(value)
  }

  // ── baselines: processes of their own, fed the very same requests ──
  // (started side by side: each start is mostly waiting)
  const start = stableStart(layout)
  const bareStarting = startProcess({ name: 'bare', script: DIST + 'bench/baselines/server.js', args: ['bare'], env: {}, port: await freePort() })
  bareStarting.catch(() => {}) // judged below, once the others started too
  // bare Fastify carrying the node's own verify answer: verify-hot's ratio taken apart
  const answerStarting = opts.scenarios.includes('verify-hot')
    ? startProcess({ name: 'answer', script: DIST + 'bench/baselines/server.js', args: ['answer'], env: { VERIFY_ANSWER: await S.verifyAnswer(urls[0]!, ds) }, port: await freePort() })
    : undefined
  answerStarting?.catch(() => {})
  let naiveStarting: Promise<Proc> | undefined
  let updateStarting: Promise<Proc> | undefined
  if (scratch) {
    let baselineDbUrl = scratch.url
    if (remote || store === 'embedded') {
      // the rows the baselines read and write, copied into the scratch PostgreSQL database
      const db = createPostgresDb(scratch.url, { statementTimeoutMs: 600_000 })
      await copyUsers(db, ds, start, start + layout.hot)
      await copyUsers(db, ds, layout.mixed, layout.mixed + layout.invalidate)
      await db.close()
    }
    naiveStarting = startProcess({
      name: 'naive',
      script: DIST + 'bench/baselines/server.js',
      args: ['naive'],
      env: { DATABASE_URL: baselineDbUrl, JWT_SECRET: jwtSecret },
      port: await freePort(),
    })
    naiveStarting.catch(() => {})
    const updateEnv: Record<string, string> = { DATABASE_URL: baselineDbUrl }
    if (store === 'embedded' && !remote) {
      // commits on the same kind of store as the node's: a PGlite copy of the invalidate range
      const liteDir = mkdtempSync(join(tmpdir(), 'bench-update-'))
      if (!args.keep) cleanups.push(async () => rmSync(liteDir, { recursive: true, force: true }))
      const lite = await createPgliteDb(liteDir)
      await copyUsers(lite, ds, layout.mixed, layout.mixed + layout.invalidate)
      await lite.close()
      updateEnv.PGLITE_DIR = liteDir
    }
    updateStarting = startProcess({ name: 'update', script: DIST + 'bench/baselines/server.js', args: ['update'], env: updateEnv, port: await freePort() })
    if (remote) notes.push('naive and update baselines ran on this machine against its PostgreSQL, not against the deployment\'s')
  } else {
    notes.push('no PostgreSQL reachable: naive-verifier and UPDATE baselines skipped')
  }
  // every start settled (what started is stopped at the end) before a failed one fails the run
  const baselines = await Promise.allSettled([bareStarting, naiveStarting, updateStarting, answerStarting])
  for (const b of baselines) if (b.status === 'fulfilled' && b.value) procs.push(b.value)
  for (const b of baselines) if (b.status === 'rejected') throw b.reason
  const [bare, naive, update, answer] = baselines.map((b) => (b.status === 'fulfilled' ? b.value : undefined)) as [Proc, Proc | undefined, Proc | undefined, Proc | undefined]

  // ── memory: heap per cached user, in a process of its own with --expose-gc ──
  let memory: MemoryResult | undefined
  if (opts.memoryUsers > 0) {
    log(`measuring heap per cached user (${opts.memoryUsers.toLocaleString('en-US')} users in src/cache/states.ts)`)
    memory = await runMemory(opts.memoryUsers, opts.memoryRevoked)
  }

  const load = (label: string, workload: Workload, target: string[], durationS: number, rate?: number) =>
    runLoad(workload, { label, urls: target, connections: opts.connections, durationS, rate, progress: process.stderr })
  const measured = async (key: string, label: string, make: () => Workload, target: string[], proc?: Proc, rate?: number) => {
    const workload = make()
    if (opts.warmup > 0) await load(`${label} (warm-up)`, workload, target, opts.warmup, rate)
    await workload.settle?.()
    workload.reset?.()
    // On a machine of few cores the generator competes with the server: what each used says which one bounded the run.
    const started = performance.now()
    const generatorBefore = process.cpuUsage()
    const serverBefore = proc ? cpuSeconds(proc.pid) : undefined
    const serverMainBefore = proc ? mainThreadCpuSeconds(proc.pid) : undefined
    const result = await load(label, workload, target, opts.duration, rate)
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
    ;(results[key] ??= []).push(result)
    rssOf(key, proc)
    return result
  }

  // ── fill the node's cache with every unchanging user, then read its RSS ──
  let fill: Report['fill']
  if (opts.fill && main) {
    const count = layout.users
    const empty = await main.memory()
    const rssEmpty = main.rssMb()
    log(`filling the node's cache: one verification for each of ${count.toLocaleString('en-US')} users`)
    const workload = S.verifyAllOnce(ds)
    const result = await runLoad(workload, { label: 'fill', urls, connections: opts.connections, durationS: 3600, amount: count, progress: process.stderr })
    const rssMb = main.rssMb()
    const peakRssMb = main.peakRssMb()
    const cached = await cacheEntries(main.url)
    const full = await main.memory()
    const mb = (b: number | undefined) => (b === undefined ? undefined : b / 2 ** 20)
    fill = {
      rps: result.rps,
      p99: result.latency.p99,
      rssMb,
      peakRssMb,
      rssEmptyMb: rssEmpty,
      rssAfterGcMb: mb(full?.after.rss),
      heapLiveMb: mb(full?.after.heapUsed),
      heapBeforeGcMb: mb(full?.before.heapUsed),
      heapTotalMb: mb(full?.before.heapTotal),
      liveBytesPerUser: full && empty && cached ? (full.after.heapUsed - empty.after.heapUsed) / Math.max(1, full.cached.users - empty.cached.users) : undefined,
      cached: full?.cached.users ?? cached,
    }
    log(
      `  ${fill.cached?.toLocaleString('en-US') ?? '?'} users cached at ${Math.round(result.rps)} verifications/s; node RSS ${rssMb?.toFixed(0)} MB ` +
        `(peak ${peakRssMb?.toFixed(0)}), live heap after GC ${fill.heapLiveMb?.toFixed(0)} MB (${fill.liveBytesPerUser?.toFixed(0)} B/user), RSS after GC ${fill.rssAfterGcMb?.toFixed(0)} MB`,
    )
  }

  // ── interleaved rounds: baselines and scenarios on the same machine, same settings ──
  const want = (s: S.ScenarioName) => opts.scenarios.includes(s)
  // the README's nginx and Caddy recipes in front of the main node (bench/lib/proxies.ts)
  let proxyRig: ProxyRig | undefined
  const proxySkipped = !want('proxy') ? undefined : !main ? 'proxy scenario skipped: it runs in front of a node the kit starts' : proxiesMissing()
  if (want('proxy') && main && !proxySkipped) {
    proxyRig = await startProxyRig(main.url, args['proxy-readme'])
    cleanups.push(() => proxyRig!.stop())
  }
  // the node knows the mixed users as it knows anyone who had a token (S.issueMixedOnce)
  const primeMixed = async (target: string) => {
    const primed = await runLoad(S.issueMixedOnce(ds), { label: 'mixed users: one token each', urls: [target], connections: opts.connections, durationS: 3600, amount: layout.mixed, progress: process.stderr })
    const refused = primed.responses - (primed.statuses['200'] ?? 0)
    if (refused > 0 || primed.errors > 0) throw new Error(`a token for a mixed user was refused (${JSON.stringify(primed.statuses)}, ${primed.errors} errors)`)
  }
  if (want('mixed')) for (const target of urls) await primeMixed(target)
  let mixedWorkload: ReturnType<typeof S.mixed> | undefined
  let latencyRate: number | undefined
  const mixedStats: S.MixedStats[] = []
  for (let round = 1; round <= opts.rounds; round++) {
    log(`round ${round}/${opts.rounds}`)
    const r = `r${round}`
    const bareResult = await measured('bare', `bare fastify ${r}`, () => S.verifyHot(ds), [bare.url], bare)
    if (naive) await measured('naive', `naive verifier ${r}`, () => S.verifyHot(ds), [naive.url], naive)
    if (want('verify-hot')) await measured('verify-hot', `verify-hot ${r}`, () => S.verifyHot(ds), urls, main)
    if (answer) await measured('answer', `bare fastify, verify's answer ${r}`, () => S.verifyHot(ds), [answer.url], answer)
    if (want('verify-hot') && opts.rateShare > 0) {
      // Closed-loop latency at saturation is queueing (Little's law: 50 connections / req/s);
      // the latency target is also measured at a fixed offered rate, half the HTTP ceiling.
      latencyRate ??= Math.max(500, Math.round((bareResult.rps * opts.rateShare) / 500) * 500)
      await measured('bare@rate', `bare fastify @${latencyRate}/s ${r}`, () => S.verifyHot(ds), [bare.url], bare, latencyRate)
      await measured('verify-hot@rate', `verify-hot @${latencyRate}/s ${r}`, () => S.verifyHot(ds), urls, main, latencyRate)
    }
    if (want('issue-existing')) await measured('issue-existing', `issue-existing ${r}`, () => S.issueExisting(ds), urls, main)
    if (update && (want('invalidate') || want('issue-new'))) await measured('update', `plain UPDATE ${r}`, () => S.invalidate(ds), [update.url], update)
    if (want('issue-new')) await measured('issue-new', `issue-new ${r}`, () => S.issueNew(ds), urls, main)
    if (want('invalidate')) await measured('invalidate', `invalidate ${r}`, () => S.invalidate(ds), urls, main)
    for (const path of proxyRig?.paths ?? []) await measured(path.key, `${path.label} ${r}`, () => proxiedChat(ds, path), [path.url], path.checked ? main : proxyRig!.backend)
    if (want('mixed')) {
      if (update) await measured('mixed-shape', `bare fastify + plain UPDATE, mixed's shape ${r}`, () => S.mixedShape(ds), [update.url], update)
      await measured('mixed', `mixed ${r}`, () => (mixedWorkload = S.mixed(ds, { readVersion })), urls, main)
      mixedStats.push({ ...mixedWorkload!.stats })
      S.saveMixed(ds, mixedWorkload!)
    }
  }

  // ── the same verify-hot with revocations in place: N revoked jtis and a company-wide revoke ──
  if (opts.revocations > 0 && want('verify-hot') && main) {
    if (!prepared) throw new Error('--revocations needs --prepare sql (the hot tokens are signed again after the company revoke)')
    log(`revoking ${opts.revocations.toLocaleString('en-US')} tokens one by one, then every token of the company`)
    const started = Date.now()
    const start = stableStart(layout) + layout.hot
    if (start + opts.revocations > layout.users) throw new Error('--revocations: more than the users outside the hot set')
    let next = 0
    const revokeOne = async () => {
      for (let i = next++; i < opts.revocations; i = next++) {
        const response = await fetch(`${main!.url}/rest/v1/auth/revoke-token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ keyId: ds.keyId, keySecret: ds.keySecret, token: ds.token(start + i) }),
        })
        if (response.status !== 200) throw new Error(`revoke-token: ${response.status} ${await response.text()}`)
      }
    }
    await Promise.all(Array.from({ length: 32 }, revokeOne))
    const company = await fetch(`${main.url}/admin/v1/companies/${ds.companyId}/revoke-tokens`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}` } })
    if (company.status !== 200) throw new Error(`company revoke-tokens: ${company.status} ${await company.text()}`)
    const revokedHot = await fetch(`${main.url}/rest/v1/auth/verify`, { headers: { authorization: `Bearer ${ds.token(stableStart(layout))}` } })
    if (revokedHot.status !== 401) throw new Error(`a hot token signed before the company revoke still verifies (${revokedHot.status})`)
    // Tokens signed after the revoke carry the company's new tokens generation: valid again.
    ds = sqlDataset(prepared, layout, jwtSecret, { cgen: 1 })
    const metrics = await (await fetch(`${main.url}/metrics`)).text()
    const held = /^chat_auth_revocation_filter_entries (\d+)/m.exec(metrics)?.[1]
    log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s; the node holds ${held ?? '?'} revoked jtis`)
    notes.push(`"+ revocations": after ${opts.revocations.toLocaleString('en-US')} revoke-token calls and a company revoke-tokens (the node held ${held ?? '?'} revoked jtis); hot tokens signed after it`)
    for (let round = 1; round <= opts.rounds; round++) {
      log(`round ${round}/${opts.rounds} with revocations`)
      await measured('bare+revoked', `bare fastify (revocations phase) r${round}`, () => S.verifyHot(ds), [bare.url], bare)
      await measured('verify-hot+revoked', `verify-hot with revocations r${round}`, () => S.verifyHot(ds), urls, main)
    }
  }

  // ── the same verify-hot with N sessions open on the node (SPEC §8.1) ──
  if (opts.sessions > 0 && want('verify-hot') && main) {
    const start = stableStart(layout) + layout.hot
    const count = Math.min(opts.sessions, layout.users - start)
    if (!prepared || count < opts.sessions) {
      notes.push(`"+ sessions" not measured: it needs --prepare sql and ${opts.sessions.toLocaleString('en-US')} users outside the hot set`)
    } else {
      log(`opening ${count.toLocaleString('en-US')} sessions on the node`)
      const started = Date.now()
      let opened = { open: 0, refused: 0 }
      for (let from = 0; from < count; from += 5000) {
        const tokens = Array.from({ length: Math.min(5000, count - from) }, (_, i) => ds.token(start + from + i))
        opened = await main.openSessions(tokens)
      }
      if (opened.refused > 0 || opened.open !== count) throw new Error(`sessions: ${opened.open} open, ${opened.refused} refused`)
      log(`  ${opened.open.toLocaleString('en-US')} open in ${((Date.now() - started) / 1000).toFixed(1)} s`)
      notes.push(`"+ sessions": ${opened.open.toLocaleString('en-US')} sessions open on the node (one per user outside the hot set, each signal read), held while verify-hot ran again`)
      for (let round = 1; round <= opts.rounds; round++) {
        log(`round ${round}/${opts.rounds} with sessions`)
        await measured('bare+sessions', `bare fastify (sessions phase) r${round}`, () => S.verifyHot(ds), [bare.url], bare)
        await measured('verify-hot+sessions', `verify-hot with ${opened.open.toLocaleString('en-US')} sessions open r${round}`, () => S.verifyHot(ds), urls, main)
      }
    }
  }

  // ── verify-cold: a node whose cache holds a tenth of the users ──
  if (want('verify-cold') && !remote) {
    // the embedded store admits one process, and a node without Redis claims its PostgreSQL
    // database for itself: then the cold node replaces the main one
    const alone = store === 'embedded' || !args.redis
    if (alone && main) await stopProc(main)
    const cold = await startNode('cold node', { CACHE_SIZE: String(opts.coldCacheSize), REDIS_URL: args.redis ? args['redis-url'] : undefined })
    // One answer before the rounds: a node just started opens its store connections and
    // compiles its code on its first requests, which on a loaded machine took longer than a
    // whole --smoke round (0 responses, no numbers). One user cached of the cold set changes nothing else.
    await runLoad(S.verifyCold(ds), { label: 'verify-cold: a first answer', urls: [cold.url], connections: 1, durationS: 120, amount: 1, progress: null })
    for (let round = 1; round <= opts.rounds; round++) await measured('verify-cold', `verify-cold r${round}`, () => S.verifyCold(ds), [cold.url], cold)
    await stopProc(cold)
    if (alone) main = undefined
  } else if (want('verify-cold')) {
    for (let round = 1; round <= opts.rounds; round++) await measured('verify-cold', `verify-cold r${round}`, () => S.verifyCold(ds), urls)
  }

  // ── the cluster: mixed on 1, 2, …, N nodes over Redis ──
  const cluster: Array<{ nodes: number; results: LoadResult[]; stats: S.MixedStats[] }> = []
  if (opts.cluster > 0 && !remote && want('mixed')) {
    if (store !== 'pg') notes.push('cluster scenario skipped: it needs --store pg (the embedded store admits one process)')
    else {
      const { Redis } = await import('ioredis')
      const redis = new Redis(args['redis-url']!, { lazyConnect: true, maxRetriesPerRequest: 1 })
      const redisOk = await redis
        .connect()
        .then(() => redis.ping())
        .then(() => true, () => false)
      redis.disconnect()
      if (!redisOk) notes.push(`cluster scenario skipped: Redis not reachable at ${args['redis-url']}`)
      else {
        if (main) await stopProc(main)
        main = undefined
        let nodes: Proc[] = []
        try {
          for (let i = 0; i < opts.cluster; i++) nodes.push(await startNode(`node ${i + 1}`, { CACHE_SIZE: String(opts.cacheSize), REDIS_URL: args['redis-url'] }))
        } catch (error) {
          notes.push(`cluster scenario not measured: a node on Redis did not start (${firstLine(error)})`)
          for (const n of nodes) await stopProc(n)
          nodes = []
        }
        if (nodes.length) {
          for (const node of nodes) await primeMixed(node.url)
          const counts = [...new Set([1, Math.min(2, opts.cluster), opts.cluster])]
          for (const n of counts) cluster.push({ nodes: n, results: [], stats: [] })
          for (let round = 1; round <= opts.rounds; round++) {
            log(`cluster round ${round}/${opts.rounds}`)
            for (const entry of cluster) {
              const target = nodes.slice(0, entry.nodes).map((p) => p.url)
              const workload = S.mixed(ds, { readVersion })
              if (opts.warmup > 0) await load(`mixed ×${entry.nodes} nodes (warm-up)`, workload, target, opts.warmup)
              await workload.settle()
              workload.reset()
              entry.results.push(await load(`mixed ×${entry.nodes} nodes r${round}`, workload, target, opts.duration))
              await workload.settle()
              entry.stats.push({ ...workload.stats })
              S.saveMixed(ds, workload)
              for (const p of nodes.slice(0, entry.nodes)) rssOf(`cluster-${entry.nodes}`, p)
            }
          }
          for (const n of nodes) await stopProc(n)
        }
      }
    }
  }

  // ── report ──
  const report: Report = {
    command: 'npm run bench' + (process.argv.length > 2 ? ' -- ' + process.argv.slice(2).join(' ') : ''),
    machine: machineLine(),
    latencyRate,
    connections: opts.connections,
    settings: `${opts.connections} connections, pipelining 1, ${opts.rounds} round(s) of ${opts.duration} s after ${opts.warmup} s warm-up; medians over rounds`,
    data: `${layout.users.toLocaleString('en-US')} users prepared by ${prepare === 'sql' ? 'INSERT … SELECT generate_series + tokens signed by the kit' : 'the admin API + one POST /rest/v1/auth/token per user'}; hot set ${layout.hot.toLocaleString('en-US')}; store ${remote ? 'remote' : store}; node cache ${opts.cacheSize.toLocaleString('en-US')}, cold node cache ${opts.coldCacheSize.toLocaleString('en-US')}`,
    results,
    rss,
    memory,
    fill,
    mixed: mixedStats,
    cluster,
    notes,
    elapsedS: (Date.now() - t0) / 1000,
  }
  const table = buildTable(report, args.markdown)
  process.stdout.write(table + '\n')
  if (want('proxy')) process.stdout.write(proxyTable(results, args.markdown, proxySkipped) + '\n')
  if (args.json) writeFileSync(args.json, JSON.stringify({ ...report, rows: undefined, opts }, null, 2))

  // recovery and cold-start need a node on PostgreSQL and Redis of their own (bench/recovery.ts)
  if (!smoke && !remote && store === 'pg' && !args['no-recovery']) {
    for (const extra of [[], ['--cold-start']]) {
      log(`bench/recovery.ts ${extra.join(' ')}`)
      const out = await runRecovery(['--users', String(opts.users), '--pg-url', args['pg-url']!, '--redis-url', args['redis-url']!, ...extra]).catch((error: unknown) => `recovery ${extra.join(' ')} failed: ${firstLine(error)}\n`)
      process.stdout.write('\n' + out)
    }
  }
}

async function runRecovery(extra: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [DIST + 'bench/recovery.js', ...extra], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c))
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`exited ${code}`))))
  })
}

async function cacheEntries(url: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(url + '/metrics')).text()
    const match = /^chat_auth_cache_entries\{cache="users"\} (\d+)/m.exec(text)
    return match ? Number(match[1]) : undefined
  } catch {
    return undefined
  }
}

async function runMemory(usersCount: number, revoked: number | undefined): Promise<MemoryResult> {
  const revokedArgs = revoked === undefined ? [] : ['--revoked', String(revoked)]
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--expose-gc', DIST + 'bench/memory.js', '--users', String(usersCount), ...revokedArgs, '--json'], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (c: Buffer) => (out += c))
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`memory measurement exited ${code}`))
      resolve(JSON.parse(out.trim().split('\n').pop()!) as MemoryResult)
    })
  })
}

async function stopProc(proc: Proc): Promise<void> {
  await proc.stop()
  const i = procs.indexOf(proc)
  if (i >= 0) procs.splice(i, 1)
}

function progress(label: string): (what: string, done: number) => void {
  return (what, done) => {
    const line = `  ${label}: ${done.toLocaleString('en-US')} ${what}`
    if (process.stderr.isTTY) process.stderr.write('\r' + line.padEnd(60))
    else if (done % 100_000 === 0 || done < 100_000) process.stderr.write(line + '\n')
  }
}

function firstLine(error: unknown): string {
  return String(error instanceof Error ? error.message : error).split('\n')[0]!
}

function machineLine(): string {
  return `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, load generator (autocannon) on the same machine`
}

async function cleanup(): Promise<void> {
  for (const p of procs.splice(0)) await p.stop().catch(() => {})
  for (const step of cleanups.splice(0).reverse()) await step().catch((e) => process.stderr.write(`cleanup: ${firstLine(e)}\n`))
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`\n${signal}: stopping the nodes and dropping the scratch database\n`)
    cleanup().finally(() => process.exit(130))
  })
}

let exitCode = 0
try {
  await main()
} catch (error) {
  exitCode = 1
  process.stderr.write(`\nbench failed: ${error instanceof Error ? error.stack : String(error)}\n`)
  for (const p of procs) process.stderr.write(`--- ${p.name} output (tail) ---\n${p.output().slice(-2000)}\n`)
} finally {
  await cleanup()
}
process.exit(exitCode)
