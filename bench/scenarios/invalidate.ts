/** invalidate: POST /rest/v1/auth/invalidate-token round-robin over the invalidate range (an UPDATE committed each), against the plain UPDATE (reported). */
import { ratio } from '../lib/report.js'
import { defineKitPart } from '../lib/scenario.js'
import { invalidate } from '../lib/workloads.js'

export default defineKitPart({
  name: 'invalidate',
  description: 'invalidations (an UPDATE each, published on a cluster) vs a plain UPDATE (commit-bound, reported)',
  options: {},
  smoke: true,
  async round(kit, _opts, round) {
    await kit.measureUpdateOnce(round)
    await kit.measured('invalidate', `invalidate r${round}`, () => invalidate(kit.ds), kit.urls, kit.main)
  },
  rows: [{ key: 'invalidate', label: 'invalidate' }],
  checks(view) {
    const inv = view.s('invalidate')
    const update = view.s('update')
    return inv && update ? [{ text: `invalidate vs plain UPDATE: ${ratio(inv.rps, update.rps)} (reported, commit-bound)`, ok: undefined }] : []
  },
})
