/**
 * A node restarted on millions of live single-token revocations (SPEC §7.1): how long until
 * it is ready, what it holds in memory, and how fast it verifies next to a node on a store
 * without revocations, in the same run.
 *
 *   node dist/bench/revocation-restart.js [--revocations 3500000] [--rounds 3] [--duration 5]
 *     [--filter-bytes N] [--host OTHER/dist/bench/node-host.js] [--keep] [--smoke]
 *
 * Two scratch databases on the machine's PostgreSQL with the same company, agent, key and
 * users (bench/lib/data.ts): "revoked" gets a few tokens issued and revoked through the API
 * (by a node started for that and stopped), then `--revocations` rows written straight into
 * revoked_token (random UUID jtis, tokens expiring over the next 1 to 11 hours); "empty" gets
 * none. The node on "empty" is started first; then the node on "revoked" is spawned and timed
 * until /readyz answers 200, its RSS, /readyz and the revocation metrics sampled every second
 * and one verification in flight at a time measuring what a request met while it loaded.
 * Once ready: both nodes' memory after a full GC (bench/node-host.ts's IPC probe), a check
 * that every revoked token presented is refused (the API-revoked ones and tokens signed here
 * with jtis drawn from the inserted rows) and every hot token accepted, then verify-hot
 * (autocannon, 50 connections) against the two nodes alternating, `--rounds` rounds; medians
 * and their ratio. The check runs again after the rounds. Both databases are dropped at the
 * end unless `--keep`.
 *
 * `--host FILE` runs another build's bench/node-host.js (a before and an after in one sitting;
 * its metrics may be named otherwise: what is missing is printed as "-").
 */
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { parseArgs } from 'node:util'
import { createPostgresDb, type Db } from '../src/store/db.js'
import { copyUsers, hs256Keyring, layoutFor, prepareSql, sqlDataset, stableStart, type Dataset } from './lib/data.js'
import { fmtMs, runLoad, type LoadResult, type Workload } from './lib/load.js'
import { DIST, freePort, startProcess, type NodeMemory, type Proc } from './lib/procs.js'
import { median } from './lib/report.js'
import { verifyHot } from './lib/scenarios.js'
import { createScratchDatabase, type ScratchDatabase } from '../test/support/databases.js'

const HELP = `node dist/bench/revocation-restart.js [options]

  --revocations N     live revocations written into the store before the restart (3500000)
  --users N           users (20000); --hot N verify-hot's working set (10000)
  --api-revoked N     tokens issued and revoked through the API before the restart (20)
  --sampled N         inserted jtis drawn for the check, each in a token signed here (50)
  --rounds N (3)  --duration S (5)  --warmup S (1)  --connections N (50)
  --filter-bytes N    REVOCATION_FILTER_BYTES of the nodes (default: the node's own default)
  --ready-timeout S   give up waiting for /readyz 200 after S s and measure anyway (120)
  --host FILE         the node-host.js of another build (${DIST}bench/node-host.js)
  --pg-url URL        PostgreSQL server for the scratch databases (postgres://root@127.0.0.1:5432/postgres)
  --json FILE         every raw number as JSON
  --keep              keep both scratch databases
  --smoke             a few seconds: 20,000 revocations, 300 users, 1 round of 0.5 s
`

const { values: args } = parseArgs({
  options: {
    revocations: { type: 'string' },
    users: { type: 'string' },
    hot: { type: 'string' },
    'api-revoked': { type: 'string' },
    sampled: { type: 'string' },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    warmup: { type: 'string' },
    connections: { type: 'string' },
    'filter-bytes': { type: 'string' },
    'ready-timeout': { type: 'string', default: '120' },
    host: { type: 'string' },
    'pg-url': { type: 'string', default: 'postgres://root@127.0.0.1:5432/postgres' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
    smoke: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
})

if (args.help) {
  process.stdout.write(HELP)
  process.exit(0)
}

const smoke = args.smoke
const num = (value: string | undefined, fallback: number) => (value === undefined ? fallback : Number(value))
const opts = {
  revocations: num(args.revocations, smoke ? 20_000 : 3_500_000),
  users: num(args.users, smoke ? 300 : 20_000),
  hot: num(args.hot, smoke ? 200 : 10_000),
  apiRevoked: num(args['api-revoked'], smoke ? 3 : 20),
  sampled: num(args.sampled, smoke ? 5 : 50),
  rounds: num(args.rounds, smoke ? 1 : 3),
  duration: num(args.duration, smoke ? 0.5 : 5),
  warmup: num(args.warmup, smoke ? 0.1 : 1),
  connections: num(args.connections, smoke ? 10 : 50),
  readyTimeoutS: Number(args['ready-timeout']),
  host: args.host ?? DIST + 'bench/node-host.js',
}

const log = (line: string) => process.stderr.write(line + '\n')
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const mb = (bytes: number | undefined) => (bytes === undefined ? '-' : (bytes / 2 ** 20).toFixed(1))
const int = (n: number | undefined) => (n === undefined ? '-' : Math.round(n).toLocaleString('en-US'))

/** One line of the start-up timeline, sampled every second until ready (and at the end). */
interface Sample {
  s: number
  readyz: number | string
  rssMb: number | undefined
  /** the revocation metrics then (undefined: not exported by this build) */
  entries: number | undefined
  storeReads: number | undefined
  /** verifications answered since the last sample by the one-at-a-time probe, and the slowest */
  probeCount: number
  probeMaxMs: number
}

interface Metrics {
  entries?: number
  bytes?: number
  falsePositiveRatio?: number
  storeReads?: number
  loadsDone?: number
  loadsFailed?: number
  /** the build before the filter: chat_auth_revoked_tokens */
  legacyHeld?: number
}

async function readMetrics(node: Proc): Promise<Metrics> {
  try {
    const text = await (await fetch(node.url + '/metrics', { signal: AbortSignal.timeout(5000) })).text()
    const value = (name: string) => {
      const match = new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text)
      return match ? Number(match[1]) : undefined
    }
    return {
      entries: value('chat_auth_revocation_filter_entries'),
      bytes: value('chat_auth_revocation_filter_bytes'),
      falsePositiveRatio: value('chat_auth_revocation_filter_false_positive_ratio'),
      storeReads: value('chat_auth_revocation_store_reads_total'),
      loadsDone: value('chat_auth_revocation_loads_total\\{result="done"\\}'),
      loadsFailed: value('chat_auth_revocation_loads_total\\{result="failed"\\}'),
      legacyHeld: value('chat_auth_revoked_tokens'),
    }
  } catch {
    return {}
  }
}

async function status(url: string, headers: Record<string, string> = {}, timeoutMs = 10_000): Promise<number | string> {
  try {
    const response = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) })
    await response.arrayBuffer()
    return response.status
  } catch (error) {
    return (error as Error).name === 'TimeoutError' ? 'timeout' : 'error'
  }
}

async function post(url: string, body: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const text = await response.text()
  return { status: response.status, json: text ? JSON.parse(text) : undefined }
}

/** verify-hot, and every answer but 200 is wrong (every hot token is valid). */
function hotLoad(ds: Dataset): Workload {
  return { ...verifyHot(ds), check: (_slot, code) => code === 200 }
}

interface Check {
  revokedPresented: number
  revokedAccepted: number
  validPresented: number
  validRefused: number
  other: Record<string, number>
}

/** Every revoked token presented once (must be 401), and some hot tokens (must be 200). */
async function check(node: Proc, revoked: string[], valid: string[]): Promise<Check> {
  const result: Check = { revokedPresented: 0, revokedAccepted: 0, validPresented: 0, validRefused: 0, other: {} }
  const verify = (token: string) => status(node.url + '/rest/v1/auth/verify', { authorization: 'Bearer ' + token })
  for (const token of revoked) {
    const code = await verify(token)
    result.revokedPresented++
    if (code !== 401) {
      result.revokedAccepted++
      result.other[code] = (result.other[code] ?? 0) + 1
    }
  }
  for (const token of valid) {
    const code = await verify(token)
    result.validPresented++
    if (code !== 200) {
      result.validRefused++
      result.other[code] = (result.other[code] ?? 0) + 1
    }
  }
  return result
}

async function insertRevocations(db: Db, companyId: string, count: number): Promise<void> {
  const chunk = 500_000
  const started = performance.now()
  for (let from = 0; from < count; from += chunk) {
    const to = Math.min(count, from + chunk) - 1
    // tokens expiring from 1 h to 11 h from now, evenly: every one live through the run
    await db.query(
      `INSERT INTO revoked_token (jti, company_id, expires_at)
       SELECT gen_random_uuid()::text, $1, now() + interval '1 hour' + (i % 36000) * interval '1 second'
       FROM generate_series($2::int, $3::int) AS i`,
      [companyId, from, to],
    )
    log(`  ${(to + 1).toLocaleString('en-US')} revocations written (${((performance.now() - started) / 1000).toFixed(0)} s)`)
  }
  // As autovacuum would have left a table filled over hours: statistics and visibility map.
  await db.query('VACUUM ANALYZE revoked_token')
}

interface Restart {
  /** from the spawn until /healthz answered (the process listens) */
  listeningS: number
  readyS: number | undefined
  /** the first sample at or after 60 s, if the node was not ready by then */
  at60?: Sample
  timeline: Sample[]
  probe: { count: number; maxMs: number; p50Ms: number; statuses: Record<string, number> }
}

/** Spawns the node and samples it until /readyz says 200 (or the timeout). */
async function spawnAndWait(start: () => Promise<Proc>, onProc: (node: Proc) => void, warmToken: string): Promise<Restart> {
  const spawnedAt = performance.now()
  const node = await start()
  onProc(node)
  const since = () => (performance.now() - spawnedAt) / 1000
  const listeningS = since()
  let ready = false
  let done = false
  // One verification in flight at a time: what a request meets while the node loads.
  const probeMs: number[] = []
  let windowCount = 0
  let windowMax = 0
  const statuses: Record<string, number> = {}
  const probe = (async () => {
    while (!done) {
      const t0 = performance.now()
      const code = await status(node.url + '/rest/v1/auth/verify', { authorization: 'Bearer ' + warmToken }, 30_000)
      const ms = performance.now() - t0
      probeMs.push(ms)
      statuses[code] = (statuses[code] ?? 0) + 1
      windowCount++
      windowMax = Math.max(windowMax, ms)
      await sleep(20)
    }
  })()
  const timeline: Sample[] = []
  let readyS: number | undefined
  let nextSample = 0
  while (since() < opts.readyTimeoutS) {
    const code = await status(node.url + '/readyz', {}, 2000)
    if (code === 200) {
      readyS = since()
      ready = true
    }
    if (ready || since() >= nextSample) {
      const m = await readMetrics(node)
      timeline.push({ s: since(), readyz: code, rssMb: node.rssMb(), entries: m.entries ?? m.legacyHeld, storeReads: m.storeReads, probeCount: windowCount, probeMaxMs: windowMax })
      windowCount = 0
      windowMax = 0
      nextSample = Math.floor(since()) + 1
      const last = timeline[timeline.length - 1]!
      log(`  ${last.s.toFixed(1).padStart(5)} s  /readyz ${last.readyz}  RSS ${last.rssMb?.toFixed(0) ?? '-'} MB  revoked held ${int(last.entries)}  probe ${last.probeCount} answers, slowest ${fmtMs(last.probeMaxMs)} ms`)
    }
    if (ready) break
    await sleep(100)
  }
  done = true
  await probe
  const sorted = [...probeMs].sort((a, b) => a - b)
  return {
    listeningS,
    readyS,
    at60: readyS === undefined || readyS >= 60 ? timeline.find((s) => s.s >= 60) : undefined,
    timeline,
    probe: { count: probeMs.length, maxMs: sorted[sorted.length - 1] ?? 0, p50Ms: sorted[Math.floor(sorted.length / 2)] ?? 0, statuses },
  }
}

interface NodeFigures {
  rssMb: number | undefined
  peakRssMb: number | undefined
  memory: NodeMemory | undefined
  metrics: Metrics
}

async function figures(node: Proc): Promise<NodeFigures> {
  const rssMb = node.rssMb()
  const peakRssMb = node.peakRssMb()
  return { rssMb, peakRssMb, memory: await node.memory(), metrics: await readMetrics(node) }
}

async function main(): Promise<void> {
  const jwtSecret = randomBytes(32).toString('base64url')
  const adminToken = 'bench-admin-token-' + randomBytes(8).toString('hex')
  const scratch: ScratchDatabase[] = []
  const dbs: Db[] = []
  const nodes: Proc[] = []
  const began = performance.now()
  try {
    const revokedDb = await createScratchDatabase(args['pg-url'], 'bench_restart_revoked')
    scratch.push(revokedDb)
    const emptyDb = await createScratchDatabase(args['pg-url'], 'bench_restart_empty')
    scratch.push(emptyDb)
    // the kit's writes (500,000 rows a statement, VACUUM) take longer than a node's 5 s
    const dbA = createPostgresDb(revokedDb.url, { statementTimeoutMs: 600_000 })
    const dbB = createPostgresDb(emptyDb.url, { statementTimeoutMs: 600_000 })
    dbs.push(dbA, dbB)
    log(`scratch databases ${revokedDb.name} (revocations) and ${emptyDb.name} (none); ${opts.users.toLocaleString('en-US')} users in each`)
    const layout = layoutFor(opts.users, opts.hot, 0, 0)
    const prepared = await prepareSql(dbA, layout)
    const ds = sqlDataset(prepared, layout, jwtSecret)
    await copyUsers(dbB, ds, 0, layout.users)

    const startNode = async (name: string, url: string, readyPath: string) =>
      startProcess({
        name,
        script: opts.host,
        nodeFlags: ['--expose-gc'],
        env: {
          DATABASE_URL: url,
          JWT_SECRET: jwtSecret,
          ADMIN_TOKEN: adminToken,
          LOG_LEVEL: 'warn',
          SEED_DEMO: 'false',
          ...(args['filter-bytes'] ? { REVOCATION_FILTER_BYTES: args['filter-bytes'] } : {}),
        },
        port: await freePort(),
        readyPath,
        ipc: true,
      })

    // ── tokens issued and revoked for real, through the API, before the restart ──
    const firstOutside = stableStart(layout) + layout.hot
    const apiRevoked: string[] = []
    {
      const seed = await startNode('seed', revokedDb.url, '/readyz')
      nodes.push(seed)
      for (let i = 0; i < opts.apiRevoked; i++) {
        const issued = await post(seed.url + '/rest/v1/auth/token', { keyId: ds.keyId, keySecret: ds.keySecret, userId: ds.externalId((firstOutside + i) % layout.users) })
        if (issued.status !== 200) throw new Error(`token: ${issued.status} ${JSON.stringify(issued.json)}`)
        const revoked = await post(seed.url + '/rest/v1/auth/revoke-token', { keyId: ds.keyId, keySecret: ds.keySecret, token: issued.json.token })
        if (revoked.status !== 200) throw new Error(`revoke-token: ${revoked.status} ${JSON.stringify(revoked.json)}`)
        apiRevoked.push(issued.json.token as string)
      }
      await seed.stop()
      nodes.pop()
      log(`${apiRevoked.length} tokens issued and revoked through the API`)
    }

    log(`writing ${opts.revocations.toLocaleString('en-US')} live revocations into revoked_token`)
    const insertStarted = performance.now()
    await insertRevocations(dbA, ds.companyId, opts.revocations)
    const insertS = (performance.now() - insertStarted) / 1000
    const [{ n: liveRows }] = (await dbA.query(`SELECT count(*)::int AS n FROM revoked_token WHERE expires_at > now()`)) as [{ n: number }]
    // Tokens signed here (the node's secret and claims) with jtis drawn from the rows written.
    const keyring = hs256Keyring(jwtSecret)
    const sampledRows = (await dbA.query(
      `SELECT jti, extract(epoch FROM expires_at)::bigint AS exp FROM revoked_token TABLESAMPLE SYSTEM (1) ORDER BY random() LIMIT $1`,
      [opts.sampled],
    )) as Array<{ jti: string; exp: string }>
    const iat = Math.floor(Date.now() / 1000)
    const sampled = sampledRows.map((row, k) =>
      keyring.sign({ sub: ds.userId(stableStart(layout) + (k % layout.hot)), tokenVersion: 0, companyId: ds.companyId, agentId: ds.agentId, iat, exp: Number(row.exp), jti: row.jti }),
    )
    const revokedTokens = [...apiRevoked, ...sampled]
    const validTokens = Array.from({ length: Math.min(50, layout.hot) }, (_, k) => ds.token(stableStart(layout) + Math.floor((k * layout.hot) / Math.min(50, layout.hot))))

    // ── the baseline node first, then the restart ──
    log('starting the node on the store without revocations')
    const empty = await startNode('empty', emptyDb.url, '/readyz')
    nodes.push(empty)
    log(`spawning the node on ${liveRows.toLocaleString('en-US')} live revocations (${opts.host})`)
    let restarted: Proc | undefined
    const restart = await spawnAndWait(
      () => startNode('restarted', revokedDb.url, '/healthz'),
      (node) => {
        restarted = node
        nodes.push(node)
      },
      ds.token(stableStart(layout)),
    )
    const node = restarted!
    if (restart.readyS === undefined) log(`  not ready after ${opts.readyTimeoutS} s: measuring anyway`)
    else log(`  ready after ${restart.readyS.toFixed(1)} s`)

    const figuresRevoked = await figures(node)
    const figuresEmpty = await figures(empty)
    const checkBefore = await check(node, revokedTokens, validTokens)
    log(`check: ${checkBefore.revokedAccepted} of ${checkBefore.revokedPresented} revoked tokens accepted, ${checkBefore.validRefused} of ${checkBefore.validPresented} valid refused`)

    // ── verify-hot against both, alternating ──
    const runs: { revoked: LoadResult[]; empty: LoadResult[] } = { revoked: [], empty: [] }
    const readsBefore = (await readMetrics(node)).storeReads
    for (let round = 1; round <= opts.rounds; round++) {
      const order: Array<['revoked' | 'empty', Proc]> = round % 2 === 1 ? [['empty', empty], ['revoked', node]] : [['revoked', node], ['empty', empty]]
      for (const [which, target] of order) {
        if (opts.warmup > 0) await runLoad(hotLoad(ds), { label: `warm-up ${which} r${round}`, urls: [target.url], connections: opts.connections, durationS: opts.warmup, progress: null })
        runs[which].push(await runLoad(hotLoad(ds), { label: `verify-hot ${which} r${round}`, urls: [target.url], connections: opts.connections, durationS: opts.duration }))
        const last = runs[which][runs[which].length - 1]!
        log(`  r${round} ${which.padEnd(7)} ${int(last.rps)} req/s  p99 ${fmtMs(last.latency.p99)} ms  wrong ${last.wrong}  errors ${last.errors}`)
      }
    }
    const readsAfter = (await readMetrics(node)).storeReads
    const checkAfter = await check(node, revokedTokens, validTokens)
    const afterRounds = { revoked: await figures(node), empty: await figures(empty) }

    // ── report ──
    const med = (rs: LoadResult[], pick: (r: LoadResult) => number) => median(rs.map(pick))
    const rpsRevoked = med(runs.revoked, (r) => r.rps)
    const rpsEmpty = med(runs.empty, (r) => r.rps)
    const ratio = rpsRevoked / rpsEmpty
    const wrongLoad = [...runs.revoked, ...runs.empty].reduce((n, r) => n + r.wrong, 0)
    const wrongCheck = checkBefore.revokedAccepted + checkBefore.validRefused + checkAfter.revokedAccepted + checkAfter.validRefused
    const m = figuresRevoked.metrics
    const heapAfterGc = (f: NodeFigures) => mb(f.memory?.after.heapUsed)
    const buffers = (f: NodeFigures) => mb(f.memory?.after.arrayBuffers)
    const out: string[] = []
    out.push(
      `### Restart on ${liveRows.toLocaleString('en-US')} live revocations`,
      '',
      `${opts.revocations.toLocaleString('en-US')} rows written with SQL (${insertS.toFixed(0)} s, then VACUUM ANALYZE) plus ${apiRevoked.length} revoked through the API; ` +
        `${opts.users.toLocaleString('en-US')} users; REVOCATION_FILTER_BYTES ${args['filter-bytes'] ?? 'default'}; node ${opts.host === DIST + 'bench/node-host.js' ? 'this build' : opts.host}.`,
      '',
      '| node | /readyz 200 after | RSS at ready MB | peak RSS MB | heap after GC MB | array buffers MB | revoked held | filter MB | est. false-positive ratio | loads done / failed |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      `| restarted on the revocations | ${restart.readyS === undefined ? `not within ${opts.readyTimeoutS} s` : restart.readyS.toFixed(1) + ' s'} | ${figuresRevoked.rssMb?.toFixed(0) ?? '-'} | ${figuresRevoked.peakRssMb?.toFixed(0) ?? '-'} | ${heapAfterGc(figuresRevoked)} | ${buffers(figuresRevoked)} | ${int(m.entries ?? m.legacyHeld)} | ${mb(m.bytes)} | ${m.falsePositiveRatio === undefined ? '-' : m.falsePositiveRatio.toExponential(1)} | ${m.loadsDone ?? '-'} / ${m.loadsFailed ?? '-'} |`,
      `| empty store (same run) | - | ${figuresEmpty.rssMb?.toFixed(0) ?? '-'} | ${figuresEmpty.peakRssMb?.toFixed(0) ?? '-'} | ${heapAfterGc(figuresEmpty)} | ${buffers(figuresEmpty)} | ${int(figuresEmpty.metrics.entries ?? figuresEmpty.metrics.legacyHeld)} | ${mb(figuresEmpty.metrics.bytes)} | - | ${figuresEmpty.metrics.loadsDone ?? '-'} / ${figuresEmpty.metrics.loadsFailed ?? '-'} |`,
      '',
      `Listening (/healthz 200) ${restart.listeningS.toFixed(1)} s after the spawn. While it started (one verification at a time, a hot token): ${restart.probe.count} answers, median ${fmtMs(restart.probe.p50Ms)} ms, slowest ${fmtMs(restart.probe.maxMs)} ms, statuses ${JSON.stringify(restart.probe.statuses)}.` +
        (restart.at60 ? ` At 60 s: /readyz ${restart.at60.readyz}, RSS ${restart.at60.rssMb?.toFixed(0) ?? '-'} MB, revoked held ${int(restart.at60.entries)}, ${restart.at60.probeCount} probe answers in its second (slowest ${fmtMs(restart.at60.probeMaxMs)} ms).` : ''),
      '',
      '| s after spawn | /readyz | RSS MB | revoked held | store reads | probe answers | slowest ms |',
      '|---:|---:|---:|---:|---:|---:|---:|',
      ...restart.timeline.map((s) => `| ${s.s.toFixed(1)} | ${s.readyz} | ${s.rssMb?.toFixed(0) ?? '-'} | ${int(s.entries)} | ${int(s.storeReads)} | ${s.probeCount} | ${fmtMs(s.probeMaxMs)} |`),
      '',
      `### verify-hot, restarted node vs empty store (${opts.rounds} rounds of ${opts.duration} s after ${opts.warmup} s, ${opts.connections} connections, alternating)`,
      '',
      '| node | ' + runs.revoked.map((_, i) => `r${i + 1} req/s`).join(' | ') + ' | median req/s | × empty | p50 ms | p99 ms | non-200 | errors |',
      '|---|' + runs.revoked.map(() => '---:|').join('') + '---:|---:|---:|---:|---:|---:|',
      ...(['revoked', 'empty'] as const).map((which) => {
        const rs = runs[which]
        const non200 = rs.reduce((n, r) => n + Object.entries(r.statuses).reduce((k, [code, c]) => (code === '200' ? k : k + c), 0), 0)
        return `| ${which === 'revoked' ? 'restarted on the revocations' : 'empty store'} | ${rs.map((r) => int(r.rps)).join(' | ')} | ${int(med(rs, (r) => r.rps))} | ${(med(rs, (r) => r.rps) / rpsEmpty).toFixed(2)}× | ${fmtMs(med(rs, (r) => r.latency.p50))} | ${fmtMs(med(rs, (r) => r.latency.p99))} | ${non200} | ${rs.reduce((n, r) => n + r.errors, 0)} |`
      }),
      '',
      `Store reads of revoked jtis during the rounds: ${readsBefore === undefined || readsAfter === undefined ? '-' : int(readsAfter - readsBefore)}. ` +
        `RSS after the rounds: restarted ${afterRounds.revoked.rssMb?.toFixed(0) ?? '-'} MB (peak ${afterRounds.revoked.peakRssMb?.toFixed(0) ?? '-'}), empty ${afterRounds.empty.rssMb?.toFixed(0) ?? '-'} MB (peak ${afterRounds.empty.peakRssMb?.toFixed(0) ?? '-'}).`,
      `Check (before and after the rounds): ${checkBefore.revokedPresented} revoked tokens presented (${apiRevoked.length} revoked through the API, ${sampled.length} signed here with inserted jtis), accepted ${checkBefore.revokedAccepted} / ${checkAfter.revokedAccepted}; ` +
        `${checkBefore.validPresented} hot tokens, refused ${checkBefore.validRefused} / ${checkAfter.validRefused}${Object.keys({ ...checkBefore.other, ...checkAfter.other }).length ? `; statuses ${JSON.stringify(checkBefore.other)} / ${JSON.stringify(checkAfter.other)}` : ''}.`,
      '',
      `- ${restart.readyS !== undefined && restart.readyS <= 30 ? 'PASS' : 'MISS'}  ready within 30 s: ${restart.readyS === undefined ? `not within ${opts.readyTimeoutS} s` : restart.readyS.toFixed(1) + ' s'}`,
      `- ${ratio >= 0.5 ? 'PASS' : 'MISS'}  verify-hot ≥ 0.5× the empty-store node: ${ratio.toFixed(2)}×`,
      `- ${wrongLoad + wrongCheck === 0 ? 'PASS' : 'MISS'}  wrong answers 0: ${wrongLoad} in the load (non-200 for a valid token), ${wrongCheck} in the check`,
      '',
      `(${((performance.now() - began) / 1000).toFixed(0)} s in all)`,
    )
    process.stdout.write(out.join('\n') + '\n')
    if (args.json) {
      writeFileSync(
        args.json,
        JSON.stringify({ opts, liveRows, insertS, restart, figuresRevoked, figuresEmpty, afterRounds, runs, ratio, checkBefore, checkAfter, storeReadsDuringRounds: readsBefore === undefined || readsAfter === undefined ? undefined : readsAfter - readsBefore }, null, 2),
      )
    }
    if (wrongLoad + wrongCheck > 0) process.exitCode = 1
  } finally {
    await Promise.allSettled(nodes.map((n) => n.stop()))
    await Promise.allSettled(dbs.map((db) => db.close()))
    if (args.keep) log(`kept: ${scratch.map((s) => s.url).join(' ')}`)
    else await Promise.allSettled(scratch.map((s) => s.drop()))
  }
}

await main()
