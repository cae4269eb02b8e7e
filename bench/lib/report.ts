/**
 * The one report of `npm run bench`: each scenario hands back a section (tables, free
 * lines, targets, notes, its raw numbers), printed as plain text or Markdown, and written
 * whole as JSON with `--json FILE`.
 */
import * as os from 'node:os'
import type { LoadResult } from './load.js'

export interface Table {
  title?: string
  headers: string[]
  rows: string[][]
}

/** A target: PASS, MISS, or informative (`ok` undefined). */
export interface Check {
  text: string
  ok: boolean | undefined
}

export interface Section {
  /** the scenario (or `kit`, the shared deployment) it comes from */
  scenario: string
  title: string
  /** lines under the title: settings, data */
  about?: string[]
  tables?: Table[]
  /** lines after the tables */
  lines?: string[]
  checks?: Check[]
  notes?: string[]
  /** every raw number, for the JSON */
  data?: unknown
}

export interface Report {
  command: string
  machine: string
  smoke: boolean
  /** the scenarios that ran, in order */
  ran: string[]
  /** scenarios not run, and why */
  skipped: Record<string, string>
  /** scenarios that failed, and how */
  failed: Record<string, string>
  sections: Section[]
  /** seconds each scenario (or deployment, its parts' names joined) took, set-up included */
  durations: Record<string, number>
  elapsedS: number
}

export function machineLine(): string {
  return `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, load generator (autocannon) on the same machine`
}

export function table(headers: string[], rows: string[][], markdown: boolean): string {
  if (markdown) {
    return [`| ${headers.join(' | ')} |`, `|${headers.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n')
  }
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
  return [line(headers), widths.map((w) => '─'.repeat(w)).join('  '), ...rows.map(line)].join('\n')
}

export function checkLine(check: Check, markdown: boolean): string {
  return `${markdown ? '- ' : '  '}${check.ok === undefined ? '·' : check.ok ? 'PASS' : 'MISS'}  ${check.text}`
}

function renderSection(section: Section, markdown: boolean): string {
  const h = markdown ? '### ' : '\n'
  const out: string[] = [`${h}${section.title}`, '']
  if (section.about?.length) out.push(...section.about, '')
  for (const t of section.tables ?? []) {
    if (t.title) out.push(`${h}${t.title}`, '')
    out.push(table(t.headers, t.rows, markdown), '')
  }
  if (section.lines?.length) out.push(...section.lines, '')
  if (section.checks?.length || section.notes?.length) {
    out.push(`${markdown ? '#### ' : ''}targets`, '')
    for (const c of section.checks ?? []) out.push(checkLine(c, markdown))
    for (const n of section.notes ?? []) out.push(`${markdown ? '- ' : '  '}note: ${n}`)
    out.push('')
  }
  return out.join('\n')
}

export function renderReport(report: Report, markdown: boolean): string {
  const out = [`${markdown ? '## ' : ''}Chat token gateway — bench results${report.smoke ? ' (--smoke: tiny sizes, the numbers mean nothing)' : ''}`, '', `command:  ${report.command}`, `machine:  ${report.machine}`]
  for (const section of report.sections) out.push(...(markdown ? [''] : []), renderSection(section, markdown))
  const skipped = Object.entries(report.skipped)
  const failed = Object.entries(report.failed)
  if (skipped.length || failed.length) {
    out.push(`${markdown ? '### ' : '\n'}not measured`, '')
    for (const [name, why] of failed) out.push(`${markdown ? '- ' : '  '}FAILED  ${name}: ${why}`)
    for (const [name, why] of skipped) out.push(`${markdown ? '- ' : '  '}skipped  ${name}: ${why}`)
    out.push('')
  }
  const durations = Object.entries(report.durations).map(([name, s]) => `${name} ${s.toFixed(0)} s`)
  out.push(`whole run: ${report.elapsedS.toFixed(0)} s (${durations.join('; ')})`)
  return out.join('\n')
}

// ── numbers ──

export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  if (v.length === 0) return NaN
  const mid = v.length >> 1
  return v.length % 2 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2
}

/** The value at quantile q of `values` (the lower of two neighbours), NaN when empty. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(q * (sorted.length - 1))]!
}

export const int = (n: number | undefined) => (n === undefined || !Number.isFinite(n) ? '-' : Math.round(n).toLocaleString('en-US'))
export const ratio = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0 ? '-' : (a / b).toFixed(2) + '×')
export const mb = (bytes: number | undefined) => (bytes === undefined ? '-' : (bytes / 2 ** 20).toFixed(1))

/** " (ECONNRESET 2, timeout 1)": what the errors were, so that a miss for them says why. */
export function errorKindsText(kinds: Record<string, number>): string {
  const entries = Object.entries(kinds)
  return entries.length === 0 ? '' : ` (${entries.map(([kind, n]) => `${kind} ${n.toLocaleString('en-US')}`).join(', ')})`
}

export const statusesText = (s: Record<string, number>) => (Object.keys(s).length === 0 ? '0' : Object.entries(s).map(([k, v]) => `${k}:${v.toLocaleString('en-US')}`).join(' '))

export interface Summary {
  rounds: number
  rps: number
  rpsAll: number[]
  p50: number
  p99: number
  p999: number
  /** socket errors and timeouts, every round's */
  errors: number
  /** the same by kind (load.ts errorKinds), e.g. { ECONNRESET: 1 } */
  errorKinds: Record<string, number>
  non2xx: Record<string, number>
  wrong: number
  requests: number
  /** medians over rounds of the share of a core the generator and the server used */
  generatorCpu: number | undefined
  serverCpu: number | undefined
}

const medianOf = (values: Array<number | undefined>): number | undefined => {
  const known = values.filter((v): v is number => v !== undefined)
  return known.length ? median(known) : undefined
}

/** Medians over rounds of one kind of run. */
export function summarizeRuns(runs: LoadResult[] | undefined): Summary | undefined {
  if (!runs || runs.length === 0) return undefined
  const non2xx: Record<string, number> = {}
  for (const r of runs) for (const [status, n] of Object.entries(r.statuses)) if (!status.startsWith('2')) non2xx[status] = (non2xx[status] ?? 0) + n
  const errorKinds: Record<string, number> = {}
  for (const r of runs) for (const [kind, n] of Object.entries(r.errorKinds)) errorKinds[kind] = (errorKinds[kind] ?? 0) + n
  return {
    rounds: runs.length,
    rps: median(runs.map((r) => r.rps)),
    rpsAll: runs.map((r) => r.rps),
    p50: median(runs.map((r) => r.latency.p50)),
    p99: median(runs.map((r) => r.latency.p99)),
    p999: median(runs.map((r) => r.latency.p999)),
    // autocannon's errors include its timeouts
    errors: runs.reduce((n, r) => n + r.errors, 0),
    errorKinds,
    non2xx,
    wrong: runs.reduce((n, r) => n + r.wrong, 0),
    requests: runs.reduce((n, r) => n + r.responses, 0),
    generatorCpu: medianOf(runs.map((r) => r.cpu?.generator)),
    serverCpu: medianOf(runs.map((r) => r.cpu?.server)),
  }
}
