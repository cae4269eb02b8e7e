/**
 * fill: before the rounds, one verification for each user fills the node's cache; then its
 * RSS and (after a full GC, bench/node-host.ts's probe) its live heap. The rounds that follow
 * run on a node holding every user.
 */
import { runLoad } from '../lib/load.js'
import type { FillResult } from '../lib/kit/kit.js'
import { defineKitPart } from '../lib/scenario.js'
import { verifyAllOnce } from '../lib/workloads.js'

async function cacheEntries(url: string): Promise<number | undefined> {
  try {
    const text = await (await fetch(url + '/metrics')).text()
    const match = /^chat_auth_cache_entries\{cache="users"\} (\d+)/m.exec(text)
    return match ? Number(match[1]) : undefined
  } catch {
    return undefined
  }
}

export default defineKitPart({
  name: 'fill',
  description: "the node's RSS and live heap with every user cached (one verification each, before the rounds; target: ≤ 512 MB for 1,000,000)",
  options: {},
  smoke: true,
  async prepare(kit) {
    const main = kit.main
    if (kit.remote || !main) return kit.skip('fill', 'it reads the RSS of a node the kit starts')
    const count = kit.layout.users
    const empty = await main.memory()
    const rssEmpty = main.rssMb()
    kit.log(`filling the node's cache: one verification for each of ${count.toLocaleString('en-US')} users`)
    const result = await runLoad(verifyAllOnce(kit.ds), { label: 'fill', urls: kit.urls, connections: kit.opts.connections, durationS: 3600, amount: count, progress: process.stderr })
    const rssMb = main.rssMb()
    const peakRssMb = main.peakRssMb()
    const cached = await cacheEntries(main.url)
    const full = await main.memory()
    const mb = (b: number | undefined) => (b === undefined ? undefined : b / 2 ** 20)
    const fill: FillResult = {
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
    kit.record.fill = fill
    kit.log(
      `  ${fill.cached?.toLocaleString('en-US') ?? '?'} users cached at ${Math.round(result.rps)} verifications/s; node RSS ${rssMb?.toFixed(0)} MB ` +
        `(peak ${peakRssMb?.toFixed(0)}), live heap after GC ${fill.heapLiveMb?.toFixed(0)} MB (${fill.liveBytesPerUser?.toFixed(0)} B/user), RSS after GC ${fill.rssAfterGcMb?.toFixed(0)} MB`,
    )
  },
  checks(view) {
    const f = view.record.fill
    if (f?.rssMb === undefined) return []
    const cached = f.cached
    const million = cached !== undefined && cached >= 1_000_000
    const mb = (x: number | undefined) => (x === undefined ? '?' : x.toFixed(0))
    const projected =
      !million && cached && cached >= 50_000 && f.rssEmptyMb !== undefined ? `; straight-line projection to 1,000,000: ${mb(f.rssEmptyMb + ((f.rssMb - f.rssEmptyMb) * 1_000_000) / cached)} MB (run --users 1000000 to measure it)` : ''
    const rps = Math.round(f.rps).toLocaleString('en-US')
    return [
      {
        text:
          `node RSS with ${cached?.toLocaleString('en-US') ?? '?'} cached users ≤ 512 MB (for 1,000,000): ${mb(f.rssMb)} MB, peak ${mb(f.peakRssMb)} MB, ${mb(f.rssAfterGcMb)} MB after a full GC` +
          ` (RSS empty ${mb(f.rssEmptyMb)} MB; live heap ${mb(f.heapLiveMb)} MB of ${mb(f.heapTotalMb)} MB reserved; ${f.liveBytesPerUser?.toFixed(0) ?? '?'} B live heap per cached user in the node)${projected}; filled at ${rps} verifications/s`,
        ok: million ? f.rssMb <= 512 : undefined,
      },
    ]
  },
})
