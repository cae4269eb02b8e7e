/**
 * metrics-cost: what the metrics cost one verification: the two counter bumps every verify request makes
 * (its outcome code, and its route/method/status in app.ts's onResponse hook), through
 * src/metrics.ts (prom-client), against the hand-written Map counter it replaced (the
 * baseline, kept here only as that). The process metrics (event-loop monitor, GC observer)
 * run off this synchronous path: their cost shows in `npm run bench`'s verify-hot ratio.
 */
import { Metrics } from '../../src/metrics.js'
import { common, number } from '../lib/args.js'
import { defineScenario } from '../lib/scenario.js'

type Labels = Record<string, string | number>

/** The pre-prom-client counter: a Map keyed by the label values, bumped in place. */
function mapCounter(): (labels: Labels) => void {
  const series = new Map<string, { labels: Labels; value: number }>()
  return (labels) => {
    let key = ''
    for (const name in labels) key += name + '=' + labels[name] + ','
    const found = series.get(key)
    if (found) found.value += 1
    else series.set(key, { labels, value: 1 })
  }
}

function perBump(bumpOutcome: (labels: { code: string }) => void, bumpRequest: (labels: { route: string; method: string; status: number }) => void, bumps: number): number {
  // As the service calls them: one labels object kept per series.
  const outcomes = ['OK', 'TOKEN_REVOKED', 'TOKEN_EXPIRED'].map((code) => ({ code }))
  const requests = [200, 401].map((status) => ({ route: '/rest/v1/auth/verify', method: 'GET', status }))
  const started = process.hrtime.bigint()
  for (let i = 0; i < bumps; i++) {
    bumpOutcome(outcomes[i % 3]!)
    bumpRequest(requests[i & 1]!)
  }
  return Number(process.hrtime.bigint() - started) / bumps
}

const candidates = {
  'Map counter (before)': () => [mapCounter(), mapCounter()] as const,
  'src/metrics.ts on prom-client (after)': () => {
    const m = new Metrics({ processMetrics: false })
    return [m.counter('v_total', 'v', ['code']), m.counter('r_total', 'r', ['route', 'method', 'status'])] as const
  },
}

export default defineScenario({
  name: 'metrics-cost',
  description: 'the two counter bumps of a verification: src/metrics.ts (prom-client) vs the Map counter it replaced, in process',
  options: {
    bumps: number('verifications (two bumps each) per round and candidate', { default: 5_000_000, smoke: 50_000 }),
    rounds: common.rounds(5),
  },
  smoke: true,
  async run(ctx) {
    const { bumps, rounds } = ctx.opts
    const results = new Map<string, number[]>()
    for (let round = 0; round < rounds; round++) {
      // Interleaved, so a noisy neighbour on the machine hits every candidate alike.
      for (const [name, make] of Object.entries(candidates)) {
        const [outcome, request] = make()
        perBump(outcome, request, bumps / 10) // warm-up
        results.set(name, [...(results.get(name) ?? []), perBump(outcome, request, bumps)])
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
    const base = median(results.get('Map counter (before)')!)
    return {
      scenario: 'metrics-cost',
      title: `metrics-cost: ns per verification (two counter bumps), median of ${rounds} rounds of ${bumps.toLocaleString()}`,
      tables: [{ headers: ['counter', 'ns', '× before'], rows: [...results].map(([name, ns]) => [name, median(ns).toFixed(1), (median(ns) / base).toFixed(2) + '×']) }],
      data: Object.fromEntries(results),
    }
  },
})
