/**
 * cold-start: a warm node serves verify-hot on half the connections; a second node with an
 * empty cache starts on the same database and Redis and gets the other half. Reports the
 * time from its start to `/readyz` 200, and to its first 500 ms window at ≥ 0.9× the warm
 * node's in the same window (both share the machine). `--env WARM_UP_USERS=N` starts both
 * with a warm-up.
 */
import { performance } from 'node:perf_hooks'
import { number } from '../lib/args.js'
import { runLoad } from '../lib/load.js'
import { openRig, RIG_OPTIONS, roundRobin, WINDOW_MS, type Windows } from '../lib/recovery-rig.js'
import { defineScenario } from '../lib/scenario.js'

export default defineScenario({
  name: 'cold-start',
  description: 'a node with an empty cache joining a warm one under verify-hot: time to /readyz and to ≥ 0.9× the warm node; needs PostgreSQL and Redis',
  options: {
    ...RIG_OPTIONS,
    recoveryDuration: number('seconds of load on the warm node', { default: 12, smoke: 4 }),
  },
  smoke: true,
  async run(ctx) {
    const { users, connections } = ctx.opts
    const durationS = ctx.opts.recoveryDuration
    const rig = await openRig(ctx)
    const warm = await rig.startNode('warm')
    await rig.fill(warm, true)
    // the warm node alone for a while, then a new node joins and takes half the connections
    const windows: Windows = { counts: [], statuses: {} }
    const warmWindows: Windows = { counts: [], statuses: {} }
    const joinAtS = Math.min(3, durationS / 4)
    const startedAt = performance.now()
    const warmRun = runLoad(roundRobin(rig.ds, warmWindows, () => startedAt), { label: 'cold-start: warm node', urls: [warm.url], connections: Math.ceil(connections / 2), durationS, progress: null })
    await new Promise((resolve) => setTimeout(resolve, joinAtS * 1000))
    const joinStart = performance.now()
    const joining = await rig.startNode('new')
    const readyS = (performance.now() - joinStart) / 1000
    const newStartedAt = performance.now()
    const newRun = await runLoad(roundRobin(rig.ds, windows, () => newStartedAt), { label: 'cold-start: new node', urls: [joining.url], connections: Math.floor(connections / 2), durationS: Math.max(2, durationS - joinAtS - readyS) })
    const warmResult = await warmRun
    const warmPerS = warmWindows.counts.map((c) => (c ?? 0) * 2)
    const newPerS = windows.counts.map((c) => (c ?? 0) * 2)
    // Compared window by window with the warm node at the same time: both share the machine.
    const offset = Math.round((newStartedAt - startedAt) / WINDOW_MS)
    const ratios = newPerS.map((v, j) => v / Math.max(1, warmPerS[j + offset] ?? 0))
    const firstGood = ratios.findIndex((r, j) => r >= 0.9 && j < ratios.length - 1)
    const at90S = firstGood < 0 ? undefined : (firstGood * WINDOW_MS) / 1000 + readyS
    const wrong = newRun.wrong + warmResult.wrong
    const warmUp = rig.extraEnv.WARM_UP_USERS ? `, WARM_UP_USERS=${rig.extraEnv.WARM_UP_USERS}` : ''
    return {
      scenario: 'cold-start',
      title: `cold-start: ${users.toLocaleString('en-US')} users (the warm node caches the ${rig.ds.layout.hot.toLocaleString('en-US')} hot ones), ${connections} connections split over a warm and a joining node${warmUp}`,
      lines: [
        `new node: /readyz 200 after ${readyS.toFixed(1)} s; req/s per 500 ms: ${newPerS.map((v) => Math.round(v)).join(' ')}`,
        `warm node, same windows:              ${newPerS.map((_, j) => Math.round(warmPerS[j + offset] ?? 0)).join(' ')}`,
        `new node at ≥ 0.9× the warm node: ${at90S === undefined ? 'never within the run' : `${at90S.toFixed(1)} s after it started`}`,
      ],
      checks: [{ text: `cold-start: wrong answers ${wrong} (every token is valid)`, ok: wrong === 0 }],
      data: { users, readyS, at90S, newPerS, warmPerS, offset, wrong },
    }
  },
})
