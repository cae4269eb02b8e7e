/** issue-new: POST /rest/v1/auth/token for users never seen (an INSERT committed each), against the plain single-row UPDATE (reported). */
import { ratio } from '../lib/report.js'
import { defineKitPart } from '../lib/scenario.js'
import { issueNew } from '../lib/workloads.js'

export default defineKitPart({
  name: 'issue-new',
  description: 'tokens for users never seen (an INSERT each) vs a plain UPDATE (commit-bound, reported)',
  options: {},
  smoke: true,
  async round(kit, _opts, round) {
    await kit.measureUpdateOnce(round)
    await kit.measured('issue-new', `issue-new r${round}`, () => issueNew(kit.ds), kit.urls, kit.main)
  },
  rows: [{ key: 'issue-new', label: 'issue-new' }],
  checks(view) {
    const inew = view.s('issue-new')
    const update = view.s('update')
    return inew && update ? [{ text: `issue-new vs plain UPDATE: ${ratio(inew.rps, update.rps)} (reported, commit-bound)`, ok: undefined }] : []
  },
})
