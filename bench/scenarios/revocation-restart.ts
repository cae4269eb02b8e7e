/**
 * revocation-restart: a node restarted on millions of live single-token revocations (SPEC
 * §7.1): how long until it is ready, what it holds in memory, and how fast it verifies next
 * to a node on a store without revocations, in the same run.
 *
 * Two scratch databases on the machine's PostgreSQL with the same company, agent, key and
 * users (bench/lib/data.ts): "revoked" gets a few tokens issued and revoked through the API
 * (by a node started for that and stopped), then `--revocations` rows written straight into
 * revoked_token (random UUID jtis, tokens expiring over the next 1 to 11 hours); "empty" gets
 * none. The node on "empty" is started first; then the node on "revoked" is spawned and timed
 * until /readyz answers 200, its RSS, /readyz and the revocation metrics sampled every second
 * and one verification in flight at a time measuring what a request met while it loaded
 * (bench/lib/restart-probe.ts). Once ready: both nodes' memory after a full GC, a check that
 * every revoked token presented is refused (the API-revoked ones and tokens signed here with
 * jtis drawn from the inserted rows) and every hot token accepted, then verify-hot against
 * the two nodes alternating, `--rounds` rounds; medians and their ratio. The check runs again
 * after the rounds.
 *
 * `--host FILE` runs another build's bench/node-host.js (its metrics may be named otherwise:
 * what is missing is printed as "-").
 */
import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { createPostgresDb } from '../../src/store/db.js'
import { createScratchDatabase } from '../../test/support/databases.js'
import { common, number } from '../lib/args.js'
import { copyUsers, hs256Keyring, layoutFor, prepareSql, sqlDataset, stableStart, type Dataset } from '../lib/data.js'
import { fmtMs, runLoad, type LoadResult, type Workload } from '../lib/load.js'
import { DIST, freePort, startProcess, type Proc } from '../lib/procs.js'
import { int, mb, median } from '../lib/report.js'
import { check, figures, insertRevocations, post, readMetrics, spawnAndWait, type NodeFigures } from '../lib/restart-probe.js'
import { defineScenario } from '../lib/scenario.js'
import { verifyHot } from '../lib/workloads.js'

/** verify-hot, and every answer but 200 is wrong (every hot token is valid). */
function hotLoad(ds: Dataset): Workload {
  return { ...verifyHot(ds), check: (_slot, code) => code === 200 }
}

export default defineScenario({
  name: 'revocation-restart',
  description: 'a node restarted on millions of live revocations: ready within 30 s, its memory, verify-hot ≥ 0.5× a node on an empty store, 0 wrong',
  options: {
    revocations: number('live revocations written into the store with SQL before the restart', { default: 3_500_000, smoke: 20_000 }),
    users: common.users(20_000, 300),
    hot: common.hot(10_000, 200),
    apiRevoked: number('tokens issued and revoked through the API before the restart', { default: 20, smoke: 3 }),
    sampled: number('inserted jtis drawn for the check, each in a token signed here', { default: 50, smoke: 5 }),
    rounds: common.rounds(3),
    duration: common.duration(5),
    warmup: common.warmup(1, 0.1),
    connections: common.connections(50),
    filterBytes: number("REVOCATION_FILTER_BYTES of the nodes (default: the node's own)"),
    readyTimeout: number('give up waiting for /readyz 200 after S s and measure anyway', { default: 120 }),
    host: common.host(),
    pgUrl: common.pgUrl(),
    keep: common.keep(),
  },
  smoke: true,
  async run(ctx) {
    const { opts, log } = ctx
    const host = opts.host ?? DIST + 'bench/node-host.js'
    const jwtSecret = randomBytes(32).toString('base64url')
    const adminToken = 'bench-admin-token-' + randomBytes(8).toString('hex')
    const began = performance.now()
    const revokedDb = await createScratchDatabase(opts.pgUrl, 'bench_restart_revoked')
    if (!opts.keep) ctx.defer(() => revokedDb.drop())
    const emptyDb = await createScratchDatabase(opts.pgUrl, 'bench_restart_empty')
    if (!opts.keep) ctx.defer(() => emptyDb.drop())
    // the kit's writes (500,000 rows a statement, VACUUM) take longer than a node's 5 s
    const dbA = createPostgresDb(revokedDb.url, { statementTimeoutMs: 600_000 })
    const dbB = createPostgresDb(emptyDb.url, { statementTimeoutMs: 600_000 })
    ctx.defer(() => Promise.allSettled([dbA.close(), dbB.close()]))
    log(`scratch databases ${revokedDb.name} (revocations) and ${emptyDb.name} (none); ${opts.users.toLocaleString('en-US')} users in each`)
    const layout = layoutFor(opts.users, opts.hot, 0, 0)
    const prepared = await prepareSql(dbA, layout)
    const ds = sqlDataset(prepared, layout, jwtSecret)
    await copyUsers(dbB, ds, 0, layout.users)

    const startNode = async (name: string, url: string, readyPath: string) => {
      const node = await startProcess({
        name,
        script: host,
        nodeFlags: ['--expose-gc'],
        env: {
          DATABASE_URL: url,
          JWT_SECRET: jwtSecret,
          ADMIN_TOKEN: adminToken,
          LOG_LEVEL: 'warn',
          SEED_DEMO: 'false',
          ...(opts.filterBytes !== undefined ? { REVOCATION_FILTER_BYTES: String(opts.filterBytes) } : {}),
        },
        port: await freePort(),
        readyPath,
        ipc: true,
      })
      ctx.watch(node)
      ctx.defer(() => node.stop())
      return node
    }

    // ── tokens issued and revoked for real, through the API, before the restart ──
    const firstOutside = stableStart(layout) + layout.hot
    const apiRevoked: string[] = []
    {
      const seed = await startNode('seed', revokedDb.url, '/readyz')
      for (let i = 0; i < opts.apiRevoked; i++) {
        const issued = await post(seed.url + '/rest/v1/auth/token', { keyId: ds.keyId, keySecret: ds.keySecret, userId: ds.externalId((firstOutside + i) % layout.users) })
        if (issued.status !== 200) throw new Error(`token: ${issued.status} ${JSON.stringify(issued.json)}`)
        const revoked = await post(seed.url + '/rest/v1/auth/revoke-token', { keyId: ds.keyId, keySecret: ds.keySecret, token: issued.json.token })
        if (revoked.status !== 200) throw new Error(`revoke-token: ${revoked.status} ${JSON.stringify(revoked.json)}`)
        apiRevoked.push(issued.json.token as string)
      }
      await seed.stop()
      log(`${apiRevoked.length} tokens issued and revoked through the API`)
    }

    log(`writing ${opts.revocations.toLocaleString('en-US')} live revocations into revoked_token`)
    const insertStarted = performance.now()
    await insertRevocations(dbA, ds.companyId, opts.revocations, log)
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
    log(`spawning the node on ${liveRows.toLocaleString('en-US')} live revocations (${host})`)
    let restarted: Proc | undefined
    const restart = await spawnAndWait(
      () => startNode('restarted', revokedDb.url, '/healthz'),
      (node) => (restarted = node),
      ds.token(stableStart(layout)),
      opts.readyTimeout,
      log,
    )
    const node = restarted!
    if (restart.readyS === undefined) log(`  not ready after ${opts.readyTimeout} s: measuring anyway`)
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


    const med = (rs: LoadResult[], pick: (r: LoadResult) => number) => median(rs.map(pick))
    const rpsRevoked = med(runs.revoked, (r) => r.rps)
    const rpsEmpty = med(runs.empty, (r) => r.rps)
    const ratio = rpsRevoked / rpsEmpty
    const wrongLoad = [...runs.revoked, ...runs.empty].reduce((n, r) => n + r.wrong, 0)
    const wrongCheck = checkBefore.revokedAccepted + checkBefore.validRefused + checkAfter.revokedAccepted + checkAfter.validRefused
    const m = figuresRevoked.metrics
    const nodeRow = (name: string, f: NodeFigures, readyAfter: string, fpRatio: string) => [
      name,
      readyAfter,
      f.rssMb?.toFixed(0) ?? '-',
      f.peakRssMb?.toFixed(0) ?? '-',
      mb(f.memory?.after.heapUsed),
      mb(f.memory?.after.arrayBuffers),
      int(f.metrics.entries ?? f.metrics.legacyHeld),
      mb(f.metrics.bytes),
      fpRatio,
      `${f.metrics.loadsDone ?? '-'} / ${f.metrics.loadsFailed ?? '-'}`,
    ]
    const loadRow = (which: 'revoked' | 'empty') => {
      const rs = runs[which]
      const non200 = rs.reduce((n, r) => n + Object.entries(r.statuses).reduce((k, [code, c]) => (code === '200' ? k : k + c), 0), 0)
      return [which === 'revoked' ? 'restarted on the revocations' : 'empty store', ...rs.map((r) => int(r.rps)), int(med(rs, (r) => r.rps)), `${(med(rs, (r) => r.rps) / rpsEmpty).toFixed(2)}×`, fmtMs(med(rs, (r) => r.latency.p50)), fmtMs(med(rs, (r) => r.latency.p99)), String(non200), String(rs.reduce((n, r) => n + r.errors, 0))]
    }
    const readyText = restart.readyS === undefined ? `not within ${opts.readyTimeout} s` : restart.readyS.toFixed(1) + ' s'
    const at60 = restart.at60
    return {
      scenario: 'revocation-restart',
      title: `revocation-restart: a node restarted on ${liveRows.toLocaleString('en-US')} live revocations (${((performance.now() - began) / 1000).toFixed(0)} s)`,
      about: [
        `${opts.revocations.toLocaleString('en-US')} rows written with SQL (${insertS.toFixed(0)} s, then VACUUM ANALYZE) plus ${apiRevoked.length} revoked through the API; ` +
          `${opts.users.toLocaleString('en-US')} users; REVOCATION_FILTER_BYTES ${opts.filterBytes ?? 'default'}; node ${opts.host === undefined ? 'this build' : opts.host}.`,
      ],
      tables: [
        {
          headers: ['node', '/readyz 200 after', 'RSS at ready MB', 'peak RSS MB', 'heap after GC MB', 'array buffers MB', 'revoked held', 'filter MB', 'est. false-positive ratio', 'loads done / failed'],
          rows: [
            nodeRow('restarted on the revocations', figuresRevoked, readyText, m.falsePositiveRatio === undefined ? '-' : m.falsePositiveRatio.toExponential(1)),
            nodeRow('empty store (same run)', figuresEmpty, '-', '-'),
          ],
        },
        {
          title: 'the restarted node, second by second until ready',
          headers: ['s after spawn', '/readyz', 'RSS MB', 'revoked held', 'store reads', 'probe answers', 'slowest ms'],
          rows: restart.timeline.map((s) => [s.s.toFixed(1), String(s.readyz), s.rssMb?.toFixed(0) ?? '-', int(s.entries), int(s.storeReads), String(s.probeCount), fmtMs(s.probeMaxMs)]),
        },
        {
          title: `verify-hot, restarted node vs empty store (${opts.rounds} rounds of ${opts.duration} s after ${opts.warmup} s, ${opts.connections} connections, alternating)`,
          headers: ['node', ...runs.revoked.map((_, i) => `r${i + 1} req/s`), 'median req/s', '× empty', 'p50 ms', 'p99 ms', 'non-200', 'errors'],
          rows: [loadRow('revoked'), loadRow('empty')],
        },
      ],
      lines: [
        `Listening (/healthz 200) ${restart.listeningS.toFixed(1)} s after the spawn. While it started (one verification at a time, a hot token): ${restart.probe.count} answers, median ${fmtMs(restart.probe.p50Ms)} ms, slowest ${fmtMs(restart.probe.maxMs)} ms, statuses ${JSON.stringify(restart.probe.statuses)}.` +
          (at60 ? ` At 60 s: /readyz ${at60.readyz}, RSS ${at60.rssMb?.toFixed(0) ?? '-'} MB, revoked held ${int(at60.entries)}, ${at60.probeCount} probe answers in its second (slowest ${fmtMs(at60.probeMaxMs)} ms).` : ''),
        `Store reads of revoked jtis during the rounds: ${readsBefore === undefined || readsAfter === undefined ? '-' : int(readsAfter - readsBefore)}. ` +
          `RSS after the rounds: restarted ${afterRounds.revoked.rssMb?.toFixed(0) ?? '-'} MB (peak ${afterRounds.revoked.peakRssMb?.toFixed(0) ?? '-'}), empty ${afterRounds.empty.rssMb?.toFixed(0) ?? '-'} MB (peak ${afterRounds.empty.peakRssMb?.toFixed(0) ?? '-'}).`,
        `Check (before and after the rounds): ${checkBefore.revokedPresented} revoked tokens presented (${apiRevoked.length} revoked through the API, ${sampled.length} signed here with inserted jtis), accepted ${checkBefore.revokedAccepted} / ${checkAfter.revokedAccepted}; ` +
          `${checkBefore.validPresented} hot tokens, refused ${checkBefore.validRefused} / ${checkAfter.validRefused}${Object.keys({ ...checkBefore.other, ...checkAfter.other }).length ? `; statuses ${JSON.stringify(checkBefore.other)} / ${JSON.stringify(checkAfter.other)}` : ''}.`,
      ],
      checks: [
        { text: `ready within 30 s: ${readyText}`, ok: restart.readyS !== undefined && restart.readyS <= 30 },
        { text: `verify-hot ≥ 0.5× the empty-store node: ${ratio.toFixed(2)}×`, ok: ratio >= 0.5 },
        { text: `wrong answers 0: ${wrongLoad} in the load (non-200 for a valid token), ${wrongCheck} in the check`, ok: wrongLoad + wrongCheck === 0 },
      ],
      data: { opts, liveRows, insertS, restart, figuresRevoked, figuresEmpty, afterRounds, runs, ratio, checkBefore, checkAfter, storeReadsDuringRounds: readsBefore === undefined || readsAfter === undefined ? undefined : readsAfter - readsBefore },
    }
  },
})
