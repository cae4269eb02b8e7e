/** issue-existing: POST /rest/v1/auth/token for hot users (credentials check, user lookup, signing), against bare Fastify (≥ 0.5×). */
import { ratio } from '../lib/report.js'
import { defineKitPart } from '../lib/scenario.js'
import { issueExisting } from '../lib/workloads.js'

export default defineKitPart({
  name: 'issue-existing',
  description: 'tokens for known users vs bare Fastify (≥ 0.5×)',
  options: {},
  smoke: true,
  async round(kit, _opts, round) {
    await kit.measured('issue-existing', `issue-existing r${round}`, () => issueExisting(kit.ds), kit.urls, kit.main)
  },
  rows: [{ key: 'issue-existing', label: 'issue-existing' }],
  roundRows: [{ key: 'issue-existing', label: 'issue-existing' }],
  checks(view) {
    const issue = view.s('issue-existing')
    const bare = view.s('bare')
    return issue && bare ? [{ text: `issue-existing ≥ 0.5 × bare Fastify: ${ratio(issue.rps, bare.rps)}${view.pairedRatio('issue-existing')}`, ok: issue.rps >= 0.5 * bare.rps }] : []
  },
})
