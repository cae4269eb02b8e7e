/**
 * The deployment's section of the report: one table of medians over rounds with every
 * result as a ratio to the baselines of the same run, each round against the bare round run
 * just before it, and the parts' targets.
 */
import { fmtMs, type LoadResult } from '../load.js'
import { errorKindsText, int, ratio, statusesText, type Check, type Section, type Summary, type Table } from '../report.js'
import type { KitPart, KitRow } from '../scenario.js'
import type { Kit, KitView } from './kit.js'

/** The baselines every round measures first. */
const BASELINE_ROWS: KitRow[] = [
  { key: 'bare', label: 'baseline: bare Fastify' },
  { key: 'naive', label: 'baseline: naive verifier (JWT + PG row)' },
  { key: 'update', label: 'baseline: plain single-row UPDATE' },
]

export interface SelectedPart {
  part: KitPart
  opts: any
}

/** the generator's and the server's share of one core, e.g. "98/72 %": a generator near 100 % bounded the run */
const cpuShares = (x: Summary) => (x.generatorCpu === undefined ? '-' : `${Math.round(x.generatorCpu * 100)}/${x.serverCpu === undefined ? '-' : Math.round(x.serverCpu * 100)} %`)
const labelOf = (row: KitRow, view: KitView) => (typeof row.label === 'string' ? row.label : row.label(view))

function mainTable(view: KitView, rows: KitRow[]): Table {
  const bare = view.s('bare')
  const naive = view.s('naive')
  const update = view.s('update')
  const rssMax = (key: string) => (view.rss[key]?.length ? Math.max(...view.rss[key]!) : undefined)
  const body: string[][] = []
  for (const row of rows) {
    const x = view.s(row.key)
    if (!x) continue
    body.push([
      labelOf(row, view),
      int(x.rps),
      ratio(x.rps, bare?.rps),
      ratio(x.rps, naive?.rps),
      ratio(x.rps, update?.rps),
      fmtMs(x.p50),
      fmtMs(x.p99),
      fmtMs(x.p999),
      int(x.errors) + errorKindsText(x.errorKinds),
      statusesText(x.non2xx),
      row.judged ? int(x.wrong) : '-',
      rssMax(row.key) === undefined ? '-' : int(rssMax(row.key)),
      cpuShares(x),
    ])
  }
  return { headers: ['scenario', 'req/s', '× bare', '× naive', '× UPDATE', 'p50 ms', 'p99 ms', 'p99.9 ms', 'errors', 'non-2xx', 'wrong', 'RSS MB', 'CPU gen/server'], rows: body }
}

/**
 * Each round's ratio to the bare round run just before it, with the server's CPU per
 * request: on a shared machine whose speed moves in phases of minutes, the medians of the
 * main table can pair a bare round of one phase with a scenario's round of another; this
 * shows which rounds moved, and whether the server's cost or the machine did.
 */
function roundsTable(view: KitView, rows: KitRow[]): Table | undefined {
  const bare = view.results.bare
  if (!bare || bare.length < 2) return undefined
  // each cell also says how much of the server's CPU ran off its main thread (V8's concurrent marking and compiler, libuv's pool)
  const serverCost = (run: LoadResult) => {
    const server = run.cpu?.server
    if (server === undefined) return ''
    const µs = (share: number) => ((1e6 * share) / run.rps).toFixed(0)
    const main = run.cpu?.serverMain
    return main === undefined ? ` (${µs(server)} µs)` : ` (${µs(server)} µs, ${µs(Math.max(0, server - main))} off-thread)`
  }
  const body = [['bare Fastify', ...bare.map((run) => int(run.rps) + serverCost(run))]]
  for (const row of rows) {
    const ratios = view.roundRatios(row.key)
    if (ratios) body.push([labelOf(row, view), ...ratios.map((r, round) => `${r.toFixed(2)}×${serverCost(view.results[row.key]![round]!)}`)])
  }
  if (body.length === 1) return undefined
  return { title: 'each round against the bare round before it', headers: ['req/s, × bare (server µs per request, of it off the main thread)', ...bare.map((_, round) => `round ${round + 1}`)], rows: body }
}

/** The deployment's section, then the parts' own sections. */
export function kitSections(kit: Kit, parts: SelectedPart[], elapsedS: number): Section[] {
  const { opts, layout } = kit
  const rows = [...BASELINE_ROWS, ...parts.flatMap(({ part }) => part.rows ?? [])]
  const tables: Table[] = [mainTable(kit, rows)]
  const perRound = roundsTable(kit, parts.flatMap(({ part }) => part.roundRows ?? []))
  if (perRound) tables.push(perRound)
  for (const { part, opts } of parts) tables.push(...(part.tables?.(kit, opts) ?? []))
  const checks: Check[] = parts.flatMap(({ part, opts }) => part.checks?.(kit, opts) ?? [])
  const settings = `${opts.connections} connections, pipelining 1, ${opts.rounds} round(s) of ${opts.duration} s after ${opts.warmup} s warm-up; medians over rounds`
  const prepared = kit.prepare === 'sql' ? 'INSERT … SELECT generate_series + tokens signed by the kit' : 'the admin API + one POST /rest/v1/auth/token per user'
  const cold = kit.record.coldCacheSize === undefined ? '' : `, cold node cache ${kit.record.coldCacheSize.toLocaleString('en-US')}`
  const data = `${layout.users.toLocaleString('en-US')} users prepared by ${prepared}; hot set ${layout.hot.toLocaleString('en-US')}; store ${kit.remote ? 'remote' : kit.store}; node cache ${opts.cacheSize.toLocaleString('en-US')}${cold}`
  const section: Section = {
    scenario: 'kit',
    title: `${parts.map(({ part }) => part.name).join(', ')}: one deployment, its baselines, interleaved rounds (${elapsedS.toFixed(0)} s)`,
    about: [`load:     ${settings}`, `data:     ${data}`],
    tables,
    checks,
    notes: kit.record.notes,
    data: { settings, data, parts: parts.map(({ part }) => part.name), opts, results: kit.results, rss: kit.rss, ...kit.record },
  }
  return [section, ...parts.flatMap(({ part, opts }) => part.sections?.(kit, opts) ?? [])]
}
