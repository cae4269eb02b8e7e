/**
 * What the metrics cost one verification: the two counter bumps every verify request makes
 * (its outcome code, and its route/method/status in app.ts's onResponse hook), through
 * src/metrics.ts (prom-client), against the hand-written Map counter it replaced (the
 * baseline, kept here only as that). The process metrics (event-loop monitor, GC observer)
 * run off this synchronous path: their cost shows in `npm run bench`'s verify-hot ratio.
 *
 *   node dist/bench/metrics-cost.js [--bumps 5000000] [--rounds 5]
 */
import { parseArgs } from 'node:util'
import { Metrics } from '../src/metrics.js'

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

const { values } = parseArgs({ options: { bumps: { type: 'string', default: '5000000' }, rounds: { type: 'string', default: '5' } } })
const bumps = Number(values.bumps)
const rounds = Number(values.rounds)

const candidates = {
  'Map counter (before)': () => [mapCounter(), mapCounter()] as const,
  'src/metrics.ts on prom-client (after)': () => {
    const m = new Metrics({ processMetrics: false })
    return [m.counter('v_total', 'v', ['code']), m.counter('r_total', 'r', ['route', 'method', 'status'])] as const
  },
}

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
console.log(`ns per verification (two counter bumps), median of ${rounds} rounds of ${bumps.toLocaleString()}:`)
for (const [name, ns] of results) console.log(`  ${name.padEnd(40)} ${median(ns).toFixed(1).padStart(7)} ns  (${(median(ns) / base).toFixed(2)}× before)`)
