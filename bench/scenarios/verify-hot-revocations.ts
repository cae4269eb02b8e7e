/**
 * verify-hot-revocations: after verify-hot's rounds, N tokens revoked one by one and every
 * token of the company revoked (through the API), then bare Fastify and verify-hot again,
 * with hot tokens signed after that revoke: verify-hot's ratio to bare with revocations in
 * place against the ratio without (target: within 10 %). The company revoke refuses every
 * token the other parts hold, so it runs on a deployment of its own but with verify-hot.
 */
import { number } from '../lib/args.js'
import { sqlDataset, stableStart } from '../lib/data.js'
import { defineKitPart } from '../lib/scenario.js'
import { verifyHot } from '../lib/workloads.js'

export default defineKitPart({
  name: 'verify-hot-revocations',
  description: 'verify-hot again after N revoke-token calls and a company revoke-tokens: its ratio to bare within 10 % of the one without',
  options: {
    revocations: number('tokens revoked one by one through the API before the company revoke (each a user outside the hot set)', { default: 10_000, smoke: 20 }),
  },
  smoke: true,
  requires: ['verify-hot'],
  apart: ['fill', 'verify-hot', 'verify-hot-sessions'],
  needsSql: true,
  // revocations in the dataset's one company: room for all of them
  mainEnv: (opts) => ({ MAX_LIVE_TOKEN_REVOCATIONS: opts.revocations > 100_000 ? String(opts.revocations) : undefined }),
  async after(kit, opts) {
    const main = kit.main
    if (!main) return kit.skip('verify-hot-revocations', 'it revokes on a node the kit starts')
    if (!kit.prepared) return kit.skip('verify-hot-revocations', 'it needs --prepare sql (the hot tokens are signed again after the company revoke)')
    const { layout, ds } = kit
    const start = stableStart(layout) + layout.hot
    if (start + opts.revocations > layout.users) return kit.skip('verify-hot-revocations', `--revocations ${opts.revocations}: more than the ${layout.users - start} users outside the hot set`)
    kit.log(`revoking ${opts.revocations.toLocaleString('en-US')} tokens one by one, then every token of the company`)
    const started = Date.now()
    let next = 0
    const revokeOne = async () => {
      for (let i = next++; i < opts.revocations; i = next++) {
        const response = await fetch(`${main.url}/rest/v1/auth/revoke-token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ keyId: ds.keyId, keySecret: ds.keySecret, token: ds.token(start + i) }),
        })
        if (response.status !== 200) throw new Error(`revoke-token: ${response.status} ${await response.text()}`)
      }
    }
    await Promise.all(Array.from({ length: 32 }, revokeOne))
    const company = await fetch(`${main.url}/admin/v1/companies/${ds.companyId}/revoke-tokens`, { method: 'POST', headers: { authorization: `Bearer ${kit.adminToken}` } })
    if (company.status !== 200) throw new Error(`company revoke-tokens: ${company.status} ${await company.text()}`)
    const revokedHot = await fetch(`${main.url}/rest/v1/auth/verify`, { headers: { authorization: `Bearer ${ds.token(stableStart(layout))}` } })
    if (revokedHot.status !== 401) throw new Error(`a hot token signed before the company revoke still verifies (${revokedHot.status})`)
    // Tokens signed after the revoke carry the company's new tokens generation: valid again.
    kit.ds = sqlDataset(kit.prepared, layout, kit.jwtSecret, { cgen: 1 })
    const metrics = await (await fetch(`${main.url}/metrics`)).text()
    const held = /^chat_auth_revocation_filter_entries (\d+)/m.exec(metrics)?.[1]
    kit.log(`  done in ${((Date.now() - started) / 1000).toFixed(1)} s; the node holds ${held ?? '?'} revoked jtis`)
    kit.record.notes.push(`"+ revocations": after ${opts.revocations.toLocaleString('en-US')} revoke-token calls and a company revoke-tokens (the node held ${held ?? '?'} revoked jtis); hot tokens signed after it`)
    for (let round = 1; round <= kit.opts.rounds; round++) {
      kit.log(`round ${round}/${kit.opts.rounds} with revocations`)
      await kit.measured('bare+revoked', `bare fastify (revocations phase) r${round}`, () => verifyHot(kit.ds), [kit.bare.url], kit.bare)
      await kit.measured('verify-hot+revoked', `verify-hot with revocations r${round}`, () => verifyHot(kit.ds), kit.urls, main)
    }
  },
  rows: [
    { key: 'bare+revoked', label: 'baseline: bare Fastify (revocations phase)' },
    { key: 'verify-hot+revoked', label: 'verify-hot + revocations (N revoked jtis, a company revoke)' },
  ],
  checks(view) {
    const hot = view.s('verify-hot')
    const bare = view.s('bare')
    const hotRevoked = view.s('verify-hot+revoked')
    const bareRevoked = view.s('bare+revoked')
    if (!hot || !bare || !hotRevoked || !bareRevoked) return []
    const before = hot.rps / bare.rps
    const after = hotRevoked.rps / bareRevoked.rps
    return [{ text: `verify-hot ÷ bare Fastify before revocations ${before.toFixed(2)}, with them ${after.toFixed(2)} (${((after / before - 1) * 100).toFixed(1)} %): within 10 %`, ok: Math.abs(after / before - 1) <= 0.1 }]
  },
})
