/**
 * cluster: `mixed` on 1, 2 and N nodes on the same database and Redis, every answer judged
 * by the same model: a revocation answered on one node holds on every other. The main node
 * stops first (it runs without Redis), so this runs last of the deployment's parts.
 */
import { number } from '../lib/args.js'
import { fmtMs } from '../lib/load.js'
import type { Proc } from '../lib/procs.js'
import { errorKindsText, int, median, ratio, summarizeRuns } from '../lib/report.js'
import { defineKitPart } from '../lib/scenario.js'
import { firstLine, type ClusterEntry } from '../lib/kit/kit.js'
import { mixed, saveMixed, sumMixedStats } from '../lib/workloads.js'

async function redisReachable(url: string): Promise<boolean> {
  const { Redis } = await import('ioredis')
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  const ok = await redis
    .connect()
    .then(() => redis.ping())
    .then(
      () => true,
      () => false,
    )
  redis.disconnect()
  return ok
}

export default defineKitPart({
  name: 'cluster',
  description: 'mixed on 1, 2 and N nodes over Redis, 0 wrong answers across nodes; needs --store pg and Redis',
  options: {
    cluster: number('nodes of the cluster', { default: 3, smoke: 2 }),
  },
  smoke: true,
  async after(kit, opts) {
    if (kit.remote) return kit.skip('cluster', 'it starts nodes of its own (not with --url)')
    if (kit.store !== 'pg') return kit.skip('cluster', 'it needs --store pg (the embedded store admits one process)')
    if (!(await redisReachable(opts.redisUrl))) return kit.skip('cluster', `Redis not reachable at ${opts.redisUrl}`)
    if (kit.main) await kit.stopProc(kit.main)
    kit.main = undefined
    const nodes: Proc[] = []
    try {
      for (let i = 0; i < opts.cluster; i++) nodes.push(await kit.startNode(`node ${i + 1}`, { CACHE_SIZE: String(opts.cacheSize), REDIS_URL: opts.redisUrl }))
    } catch (error) {
      for (const n of nodes) await kit.stopProc(n)
      return kit.skip('cluster', `a node on Redis did not start (${firstLine(error)})`)
    }
    for (const node of nodes) await kit.primeMixed(node.url)
    const entries: ClusterEntry[] = [...new Set([1, Math.min(2, opts.cluster), opts.cluster])].map((n) => ({ nodes: n, results: [], stats: [] }))
    kit.record.cluster.push(...entries)
    for (let round = 1; round <= opts.rounds; round++) {
      kit.log(`cluster round ${round}/${opts.rounds}`)
      for (const entry of entries) {
        const target = nodes.slice(0, entry.nodes).map((p) => p.url)
        const workload = mixed(kit.ds, { readVersion: kit.readVersion })
        if (opts.warmup > 0) await kit.load(`mixed ×${entry.nodes} nodes (warm-up)`, workload, target, opts.warmup)
        await workload.settle()
        workload.reset()
        entry.results.push(await kit.load(`mixed ×${entry.nodes} nodes r${round}`, workload, target, opts.duration))
        await workload.settle()
        entry.stats.push({ ...workload.stats })
        saveMixed(kit.ds, workload)
        for (const p of nodes.slice(0, entry.nodes)) kit.rssOf(`cluster-${entry.nodes}`, p)
      }
    }
    for (const n of nodes) await kit.stopProc(n)
  },
  tables(view) {
    const { cluster } = view.record
    if (!cluster.length) return []
    const bare = view.s('bare')
    const one = summarizeRuns(cluster[0]!.results)
    const rows = cluster.map((c) => {
      const x = summarizeRuns(c.results)!
      const inv = median(c.results.map((r) => r.byKind.invalidate?.p99 ?? NaN))
      const ver = median(c.results.map((r) => r.byKind.verify?.p99 ?? NaN))
      const rssKey = view.rss[`cluster-${c.nodes}`]
      return [
        `${c.nodes} node${c.nodes > 1 ? 's' : ''}`,
        int(x.rps),
        ratio(x.rps, one?.rps),
        ratio(x.rps, bare?.rps),
        fmtMs(x.p50),
        fmtMs(x.p99),
        fmtMs(ver),
        fmtMs(inv),
        int(x.errors) + errorKindsText(x.errorKinds),
        int(x.wrong),
        rssKey?.length ? int(Math.max(...rssKey)) : '-',
      ]
    })
    return [{ title: 'mixed on several nodes over Redis (same data, same settings)', headers: ['nodes', 'req/s', '× 1 node', '× bare', 'p50 ms', 'p99 ms', 'verify p99', 'invalidate p99', 'errors', 'wrong', 'max RSS MB/node'], rows }]
  },
  checks(view) {
    if (!view.record.cluster.length) return []
    const m = sumMixedStats(view.record.cluster.flatMap((c) => c.stats))
    return [
      {
        text: `cluster mixed: stale accepted ${m.staleAccepted}, current refused ${m.currentRefused}, stale issued ${m.staleIssued}, lost increments ${m.lostIncrement} over ${int(m.verifies)} verifications`,
        ok: m.staleAccepted + m.currentRefused + m.staleIssued + m.lostIncrement + m.unexpectedStatus === 0,
      },
    ]
  },
})
