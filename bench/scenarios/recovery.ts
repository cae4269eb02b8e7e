/**
 * recovery: what a Redis blip costs a node under load. One node on a scratch PostgreSQL
 * database and Redis (bench/lib/recovery-rig.ts), every user cached (one verification each),
 * then saturating verifications round-robin over the hot users for `--recovery-duration` s;
 * at `--kill-at` s the node's subscriber connection is killed (`CLIENT KILL TYPE pubsub`,
 * what a Redis restart, failover or network blip does). Reports responses per 500 ms window,
 * the median window before the kill, the worst one after it, how long until windows are back
 * to ≥ 0.9× that median, 503s and wrong answers (every token is valid: anything but 200 is
 * wrong), and the node's user-cache misses, flushes and catch-ups after the kill.
 */
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { number } from '../lib/args.js'
import { runLoad } from '../lib/load.js'
import type { Proc } from '../lib/procs.js'
import { openRig, RIG_OPTIONS, roundRobin, WINDOW_MS, windowMedian, type Windows } from '../lib/recovery-rig.js'
import { defineScenario } from '../lib/scenario.js'

export interface RecoveryResult {
  users: number
  windowsPerS: number[]
  killAtS: number
  medianBefore: number
  worstAfter: number
  worstRatio: number
  /** seconds from the kill until every later window is ≥ 0.9× the median before */
  backTo90S: number | undefined
  non200: Record<string, number>
  wrong: number
  errors: number
  /** from the kill to the end of the run: user-cache misses (store reads), cache flushes, catch-ups */
  afterKill: { userMisses: number; epochs: number; catchUps: number } | undefined
  /** from the kill until the node's /metrics said its cache was trusted again (polled every 10 ms) */
  untrustedMs: number | undefined
}

/** The node's counters that tell a flush from a catch-up: user-cache misses, epochs, catch-ups. */
async function counters(node: Proc): Promise<{ userMisses: number; epochs: number; catchUps: number }> {
  const text = await (await fetch(node.url + '/metrics')).text()
  const sum = (re: RegExp) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0)
  return {
    userMisses: sum(/^chat_auth_cache_misses_total\{cache="users"\} (\d+)/gm),
    epochs: sum(/^chat_auth_bus_epoch_changes_total\{[^}]*\} (\d+)/gm),
    catchUps: sum(/^chat_auth_bus_catch_ups_total\{outcome="complete"\} (\d+)/gm),
  }
}

export default defineScenario({
  name: 'recovery',
  description: "a node's subscriber killed under verify-hot (a Redis blip): req/s per 500 ms, how soon back to ≥ 0.9×, 0 wrong; needs PostgreSQL and Redis",
  options: {
    ...RIG_OPTIONS,
    recoveryDuration: number('seconds of load', { default: 12, smoke: 3 }),
    killAt: number("seconds into the load when the node's subscriber is killed", { default: 4, smoke: 1.5 }),
  },
  smoke: true,
  async run(ctx) {
    const { users, connections, redisUrl } = ctx.opts
    const durationS = ctx.opts.recoveryDuration
    const killAtS = ctx.opts.killAt
    const rig = await openRig(ctx)
    const node = await rig.startNode('warm')
    await rig.fill(node)
    const redis = new Redis(redisUrl)
    ctx.defer(() => redis.disconnect())
    const windows: Windows = { counts: [], statuses: {} }
    let startedAt = performance.now()
    let atKill: Awaited<ReturnType<typeof counters>> | undefined
    let untrustedMs: number | undefined
    const kill = setTimeout(() => {
      void counters(node).then((c) => (atKill = c))
      void redis.client('KILL', 'TYPE', 'pubsub').then(async (n) => {
        const killedAt = performance.now()
        ctx.log(`  killed ${String(n)} subscriber connection(s) at ${((killedAt - startedAt) / 1000).toFixed(2)} s`)
        // how long the node served without trusting its cache (every request read the store)
        await new Promise((resolve) => setTimeout(resolve, 5))
        while (performance.now() - killedAt < 5000 && !/^chat_auth_cache_trusted 1$/m.test(await (await fetch(node.url + '/metrics')).text())) await new Promise((resolve) => setTimeout(resolve, 10))
        untrustedMs = performance.now() - killedAt
      })
    }, killAtS * 1000)
    startedAt = performance.now()
    const run = await runLoad(roundRobin(rig.ds, windows, () => startedAt), { label: 'recovery', urls: [node.url], connections, durationS })
    clearTimeout(kill)
    const atEnd = await counters(node)
    const delta = atKill && { userMisses: atEnd.userMisses - atKill.userMisses, epochs: atEnd.epochs - atKill.epochs, catchUps: atEnd.catchUps - atKill.catchUps }
    const perS = windows.counts.map((c) => (c ?? 0) * (1000 / WINDOW_MS))
    const killWindow = Math.floor((killAtS * 1000) / WINDOW_MS)
    // the first second is warm-up; the last window is partial
    const before = perS.slice(2, killWindow)
    const after = perS.slice(killWindow, Math.floor((durationS * 1000) / WINDOW_MS))
    const medianBefore = windowMedian(before)
    const worstAfter = Math.min(...after)
    const lastLow = after.reduce((last, v, i) => (v < 0.9 * medianBefore ? i : last), -1)
    const result: RecoveryResult = {
      users,
      windowsPerS: perS,
      killAtS,
      medianBefore,
      worstAfter,
      worstRatio: worstAfter / medianBefore,
      backTo90S: lastLow === after.length - 1 ? undefined : ((lastLow + 1) * WINDOW_MS) / 1000,
      non200: windows.statuses,
      wrong: run.wrong,
      errors: run.errors,
      afterKill: delta,
      untrustedMs,
    }
    return {
      scenario: 'recovery',
      title: `recovery: ${users.toLocaleString('en-US')} cached users, verify-hot over ${rig.ds.layout.hot.toLocaleString('en-US')} of them, ${connections} connections, subscriber killed at ${killAtS} s`,
      lines: [
        `req/s per 500 ms: ${perS.map((v) => Math.round(v)).join(' ')}`,
        `median before the kill ${Math.round(medianBefore)}/s; worst window after it ${Math.round(worstAfter)}/s (${result.worstRatio.toFixed(2)}×); ` +
          `back to ≥ 0.9× ${result.backTo90S === undefined ? 'never within the run' : `${result.backTo90S.toFixed(1)} s after the kill`}`,
        `non-200: ${JSON.stringify(result.non200)} (503s: ${result.non200['503'] ?? 0}); wrong answers: ${result.wrong}; errors ${run.errors}`,
        `cache untrusted for ${untrustedMs === undefined ? '?' : `≤ ${Math.round(untrustedMs)} ms`} after the kill (polled)`,
        `after the kill: ${delta ? `${delta.userMisses} user-cache misses (store reads), ${delta.epochs} cache flushes, ${delta.catchUps} catch-ups` : 'node counters not read'}`,
      ],
      checks: [{ text: `recovery: wrong answers ${result.wrong} (every token is valid)`, ok: result.wrong === 0 }],
      data: result,
    }
  },
})
