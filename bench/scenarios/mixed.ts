/**
 * mixed: 95 % verify (10 % of them with a revoked token), 4 % issue, 1 % invalidate over the
 * mixed users, every answer judged by a client-side model of each user's version (workloads.ts
 * `mixed`); beside it, the same shape on bare Fastify with its 1 % committed by the plain
 * UPDATE: what 1 % of durable commits leave of bare Fastify on this machine, for any server.
 */
import { int, ratio, type Check } from '../lib/report.js'
import { defineKitPart } from '../lib/scenario.js'
import { mixed, mixedShape, saveMixed, sumMixedStats } from '../lib/workloads.js'

export default defineKitPart({
  name: 'mixed',
  description: '95/4/1 verify/issue/invalidate with revoked tokens, every answer judged, vs bare Fastify (≥ 0.75×) and its shape on bare Fastify + plain UPDATE',
  options: {},
  smoke: true,
  async prepare(kit) {
    for (const target of kit.urls) await kit.primeMixed(target)
  },
  async round(kit, _opts, round) {
    const r = `r${round}`
    if (kit.update) await kit.measured('mixed-shape', `bare fastify + plain UPDATE, mixed's shape ${r}`, () => mixedShape(kit.ds), [kit.update.url], kit.update)
    let workload: ReturnType<typeof mixed> | undefined
    await kit.measured('mixed', `mixed ${r}`, () => (workload = mixed(kit.ds, { readVersion: kit.readVersion })), kit.urls, kit.main)
    kit.record.mixed.push({ ...workload!.stats })
    saveMixed(kit.ds, workload!)
  },
  rows: [
    { key: 'mixed-shape', label: "baseline: bare Fastify + plain UPDATE, mixed's 95/4/1" },
    { key: 'mixed', label: 'mixed (95/4/1, stale tokens)', judged: true },
  ],
  roundRows: [
    { key: 'mixed-shape', label: "bare + UPDATE, mixed's shape" },
    { key: 'mixed', label: 'mixed' },
  ],
  checks(view) {
    const checks: Check[] = []
    const bare = view.s('bare')
    const result = view.s('mixed')
    const shape = view.s('mixed-shape')
    if (result && bare) checks.push({ text: `mixed (95/4/1) ≥ 0.75 × bare Fastify: ${ratio(result.rps, bare.rps)}${view.pairedRatio('mixed')}`, ok: result.rps >= 0.75 * bare.rps })
    if (result && bare && shape) {
      // what 1 % of committed writes leave of bare Fastify on this machine: the part of mixed's gap that is PostgreSQL's commits, not the gateway
      checks.push({
        text: `mixed's shape on bare Fastify with the plain UPDATE as its 1 %: ${ratio(shape.rps, bare.rps)} of bare Fastify${view.pairedRatio('mixed-shape')}; mixed ÷ that shape ${ratio(result.rps, shape.rps)}`,
        ok: undefined,
      })
    }
    if (result) {
      const m = sumMixedStats(view.record.mixed)
      checks.push({
        text: `mixed: ${int(m.verifies)} verifications, ${int(m.staleSent)} with a revoked token; stale accepted ${m.staleAccepted}, current refused ${m.currentRefused}, stale issued ${m.staleIssued}, lost increments ${m.lostIncrement}, unexpected statuses ${m.unexpectedStatus} (${int(m.ambiguous)} raced an invalidation: not judged)`,
        ok: result.wrong === 0,
      })
    }
    return checks
  },
})
