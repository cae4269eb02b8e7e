import autocannon from 'autocannon'
import type { EventEmitter } from 'node:events'
import { performance } from 'node:perf_hooks'
import { Histogram } from './hist.js'

/** One request as a workload builds it. */
export interface RequestSpec {
  method: 'GET' | 'POST'
  path: string
  headers?: Record<string, string>
  body?: string
  /** a label for per-kind latency (mixed: verify / issue / invalidate) */
  kind?: string
}

/**
 * The per-request state autocannon hands back from setupRequest to onResponse (its
 * "context"; with pipelining 1 each connection has exactly one request in flight).
 */
export interface Slot {
  t0?: number
  kind?: string
  skip?: boolean
  [key: string]: unknown
}

export interface Workload {
  next(slot: Slot): RequestSpec
  /** Checks an answer; returns false for a wrong answer (counted, not thrown). */
  check?(slot: Slot, status: number, body: string): boolean | void
  /** forgets what the warm-up counted */
  reset?(): void
  /** between runs: lets what the last run left in flight settle */
  settle?(): Promise<void>
}

export interface LoadOptions {
  label: string
  urls: string[]
  connections: number
  durationS: number
  /** stop after this many requests instead (durationS is then an upper bound) */
  amount?: number
  /** requests per second over all connections (autocannon overallRate); unset: as fast as answered */
  rate?: number
  pipelining?: number
  timeoutS?: number
  /** a stream to print the progress line on (stderr by default) */
  progress?: NodeJS.WriteStream | null
}

export interface LatencySummary {
  count: number
  p50: number
  p99: number
  p999: number
  mean: number
  max: number
}

export interface LoadResult {
  label: string
  elapsedS: number
  responses: number
  rps: number
  latency: LatencySummary
  statuses: Record<string, number>
  /** socket errors and timeouts (autocannon counts a timeout in both) */
  errors: number
  timeouts: number
  /** the errors by kind: a socket error's code (ECONNRESET, …), or "timeout" */
  errorKinds: Record<string, number>
  /** responses the workload's check said were wrong */
  wrong: number
  byKind: Record<string, LatencySummary & { rps: number; statuses: Record<string, number> }>
  /** share of one core used while it ran: by this process (the load generator), by the server under test when known, and of the server's by its main thread */
  cpu?: { generator: number; server: number | undefined; serverMain?: number | undefined }
}

export function summarize(h: Histogram): LatencySummary {
  return { count: h.count, p50: h.percentile(50), p99: h.percentile(99), p999: h.percentile(99.9), mean: h.mean, max: h.max }
}

/**
 * Runs autocannon against `urls` for `durationS` seconds with the workload's requests,
 * measuring latency itself (µs resolution, every status) and printing a progress line.
 */
export async function runLoad(workload: Workload, options: LoadOptions): Promise<LoadResult> {
  const all = new Histogram()
  const kinds = new Map<string, { h: Histogram; statuses: Record<string, number> }>()
  const statuses: Record<string, number> = {}
  const errorKinds: Record<string, number> = {}
  let wrong = 0
  let responses = 0
  let building = true

  const requestTemplate = {
    setupRequest(request: Record<string, unknown>, context: Slot) {
      for (const key in context) delete context[key]
      const spec = workload.next(context)
      request.method = spec.method
      request.path = spec.path
      // a fresh object every time: autocannon writes Content-Length into it
      const headers: Record<string, string> = spec.headers ? { ...spec.headers } : {}
      if (spec.body !== undefined) {
        headers['content-type'] = 'application/json'
        request.body = spec.body
      } else {
        request.body = undefined
      }
      request.headers = headers
      context.kind = spec.kind
      context.skip = building
      context.t0 = performance.now()
      return request
    },
    onResponse(status: number, body: string, context: Slot) {
      const ms = performance.now() - (context.t0 ?? performance.now())
      responses++
      statuses[status] = (statuses[status] ?? 0) + 1
      if (!context.skip) all.record(ms)
      if (context.kind !== undefined) {
        let k = kinds.get(context.kind)
        if (!k) kinds.set(context.kind, (k = { h: new Histogram(), statuses: {} }))
        if (!context.skip) k.h.record(ms)
        k.statuses[status] = (k.statuses[status] ?? 0) + 1
      }
      if (workload.check && workload.check(context, status, body) === false) wrong++
    },
  }

  const started = performance.now()
  const instance = autocannon({
    url: options.urls,
    connections: options.connections,
    duration: options.durationS,
    ...(options.amount !== undefined ? { amount: options.amount } : {}),
    ...(options.rate !== undefined ? { overallRate: options.rate } : {}),
    pipelining: options.pipelining ?? 1,
    // autocannon ends a run only on a sample tick: at its default of 1 s a 0.2 s run (or a
    // fill of a few hundred requests) would last a whole second; the kit uses none of its samples
    sampleInt: Math.max(10, Math.min(100, options.durationS * 100)),
    timeout: options.timeoutS ?? 10,
    requests: [requestTemplate as unknown as autocannon.Request],
  } as unknown as autocannon.Options)
  building = false
  // What each error was, so that a run with one can say why: autocannon only counts them.
  const emitter = instance as unknown as EventEmitter
  emitter.on('reqError', (error: Error & { code?: string }) => {
    const kind = error.code ?? (error.message === 'request timed out' ? 'timeout' : error.message)
    errorKinds[kind] = (errorKinds[kind] ?? 0) + 1
  })

  const out = options.progress === undefined ? process.stderr : options.progress
  let lastCount = 0
  let lastTime = started
  const timer = out
    ? setInterval(() => {
        const now = performance.now()
        const rate = ((responses - lastCount) * 1000) / (now - lastTime)
        lastCount = responses
        lastTime = now
        const elapsed = (now - started) / 1000
        const non2xx = Object.entries(statuses).reduce((n, [s, c]) => (s.startsWith('2') ? n : n + c), 0)
        const where = options.amount !== undefined ? `${responses.toLocaleString('en-US')}/${options.amount.toLocaleString('en-US')}` : `${elapsed.toFixed(0).padStart(3)}/${options.durationS}s`
        const line =
          `  ${options.label.padEnd(34)} ${where} ` +
          `${Math.round(rate).toLocaleString('en-US').padStart(8)} req/s  p99 ${fmtMs(all.percentile(99))}  non-2xx ${non2xx}  wrong ${wrong}`
        if (out.isTTY) out.write('\r' + line.padEnd(110))
        else if (Math.round(elapsed) % 10 === 0) out.write(line + '\n')
      }, 1000)
    : undefined

  const result = (await instance) as autocannon.Result
  if (timer) clearInterval(timer)
  if (out?.isTTY) out.write('\r' + ' '.repeat(110) + '\r')
  const elapsedS = (performance.now() - started) / 1000

  const byKind: LoadResult['byKind'] = {}
  for (const [kind, k] of kinds) {
    const total = Object.values(k.statuses).reduce((a, b) => a + b, 0)
    byKind[kind] = { ...summarize(k.h), rps: total / elapsedS, statuses: k.statuses }
  }
  return {
    label: options.label,
    elapsedS,
    responses,
    rps: responses / elapsedS,
    latency: summarize(all),
    statuses,
    errors: result.errors,
    timeouts: result.timeouts,
    errorKinds,
    wrong,
    byKind,
  }
}

export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return '-'
  return ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0)
}
