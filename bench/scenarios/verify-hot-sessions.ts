/**
 * verify-hot-sessions: after verify-hot's rounds, N sessions opened on the node (SPEC §8.1,
 * `openChatSession`, one per user outside the hot set, each signal read, held through IPC by
 * bench/node-host.ts), then bare Fastify and verify-hot again: the ratio to bare against the
 * rounds without (target: no slower beyond 5 %).
 */
import { number } from '../lib/args.js'
import { stableStart } from '../lib/data.js'
import { defineKitPart } from '../lib/scenario.js'
import { verifyHot } from '../lib/workloads.js'

export default defineKitPart({
  name: 'verify-hot-sessions',
  description: 'verify-hot again with N sessions open on the node (openChatSession): no slower beyond 5 %',
  options: {
    sessions: number('sessions opened on the node, one per user outside the hot set', { default: 100_000, smoke: 20 }),
  },
  smoke: true,
  requires: ['verify-hot'],
  async after(kit, opts) {
    const main = kit.main
    if (!main) return kit.skip('verify-hot-sessions', 'it opens sessions in a node the kit starts')
    const { layout } = kit
    const start = stableStart(layout) + layout.hot
    const count = Math.min(opts.sessions, layout.users - start)
    if (count < opts.sessions) return kit.skip('verify-hot-sessions', `it needs ${opts.sessions.toLocaleString('en-US')} users outside the hot set (there are ${count.toLocaleString('en-US')})`)
    kit.log(`opening ${count.toLocaleString('en-US')} sessions on the node`)
    const started = Date.now()
    let opened = { open: 0, refused: 0 }
    for (let from = 0; from < count; from += 5000) {
      const tokens = Array.from({ length: Math.min(5000, count - from) }, (_, i) => kit.ds.token(start + from + i))
      opened = await main.openSessions(tokens)
    }
    if (opened.refused > 0 || opened.open !== count) throw new Error(`sessions: ${opened.open} open, ${opened.refused} refused`)
    kit.log(`  ${opened.open.toLocaleString('en-US')} open in ${((Date.now() - started) / 1000).toFixed(1)} s`)
    kit.record.notes.push(`"+ sessions": ${opened.open.toLocaleString('en-US')} sessions open on the node (one per user outside the hot set, each signal read), held while verify-hot ran again`)
    for (let round = 1; round <= kit.opts.rounds; round++) {
      kit.log(`round ${round}/${kit.opts.rounds} with sessions`)
      await kit.measured('bare+sessions', `bare fastify (sessions phase) r${round}`, () => verifyHot(kit.ds), [kit.bare.url], kit.bare)
      await kit.measured('verify-hot+sessions', `verify-hot with ${opened.open.toLocaleString('en-US')} sessions open r${round}`, () => verifyHot(kit.ds), kit.urls, main)
    }
  },
  rows: [
    { key: 'bare+sessions', label: 'baseline: bare Fastify (sessions phase)' },
    { key: 'verify-hot+sessions', label: 'verify-hot + open sessions (N openChatSession on the node)' },
  ],
  checks(view) {
    const hot = view.s('verify-hot')
    const bare = view.s('bare')
    const hotSessions = view.s('verify-hot+sessions')
    const bareSessions = view.s('bare+sessions')
    if (!hot || !bare || !hotSessions || !bareSessions) return []
    const before = hot.rps / bare.rps
    const after = hotSessions.rps / bareSessions.rps
    // no slower beyond noise: these machines' same-run ratios wander by about 5 %
    return [{ text: `verify-hot ÷ bare Fastify with no session open ${before.toFixed(2)}, with the sessions ${after.toFixed(2)} (${((after / before - 1) * 100).toFixed(1)} %): no slower beyond 5 %`, ok: after / before >= 0.95 }]
  },
})
