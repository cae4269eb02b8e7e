import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client'

/**
 * The node's Prometheus metrics, on prom-client: one registry per gateway for the service's
 * own series, plus the process's (CPU, memory, event loop, GC), collected once per process
 * however many gateways it runs. Counters are bumped on the request path; values kept
 * elsewhere (a cache's hit count, a queue's length) are read when /metrics is scraped.
 */
export type LabelValues<L extends string> = Record<L, string | number>

/** Labels only for a series that declared label names; none otherwise. */
type LabelsArgument<L extends string> = [L] extends [never] ? undefined : LabelValues<L>

export interface Sample<L extends string> {
  labels: LabelValues<L>
  value: number
}

export const METRICS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

/**
 * Seconds, for latencies from a sub-millisecond local publish up to a lease waited out
 * (CACHE_LEASE_MS, seconds): histograms sum across nodes, unlike per-node quantiles.
 */
export const LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

let processRegistry: Registry | undefined

/** The process's default metrics, registered once: their GC observer and event-loop monitor are per process. */
function processMetrics(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry()
    collectDefaultMetrics({ register: processRegistry })
  }
  return processRegistry
}

export class Metrics {
  readonly registry = new Registry()
  private readonly process: Registry | undefined

  /** `processMetrics: false` leaves the process's metrics to an embedding app's own registry. */
  constructor(options: { processMetrics?: boolean } = {}) {
    this.process = options.processMetrics === false ? undefined : processMetrics()
  }

  /** A counter; with label names, each call names its series (prom-client checks them). */
  counter<L extends string = never>(name: string, help: string, labelNames: readonly L[] = []): (labels?: LabelsArgument<L>, by?: number) => void {
    const counter = new Counter<L>({ name, help, labelNames, registers: [this.registry] })
    if (labelNames.length === 0) return (_labels, by = 1) => counter.inc(by)
    return (labels, by = 1) => counter.inc(labels as LabelValues<L>, by)
  }

  /**
   * A counter for the request path: `series(labels)` is called once per label set and hands
   * back that series' increment, a plain addition (prom-client's own `inc` hashes the labels
   * on every call); the totals reach prom-client when /metrics is scraped.
   */
  seriesCounter<L extends string>(name: string, help: string, labelNames: readonly L[]): (labels: LabelValues<L>) => (by?: number) => void {
    const series = new Map<string, Sample<L>>()
    this.collect(name, help, 'counter', () => [...series.values()], labelNames)
    return (labels) => {
      const key = labelNames.map((label) => String(labels[label])).join('\u0000')
      let sample = series.get(key)
      if (sample === undefined) series.set(key, (sample = { labels: { ...labels }, value: 0 }))
      const counted = sample
      return (by = 1) => {
        counted.value += by
      }
    }
  }

  /** A histogram (seconds, by default LATENCY_BUCKETS_SECONDS). */
  histogram<L extends string = never>(
    name: string,
    help: string,
    options: { buckets?: number[]; labelNames?: readonly L[] } = {},
  ): (value: number, labels?: LabelsArgument<L>) => void {
    const histogram = new Histogram<L>({ name, help, buckets: options.buckets ?? LATENCY_BUCKETS_SECONDS, labelNames: options.labelNames ?? [], registers: [this.registry] })
    return (value, labels) => (labels === undefined ? histogram.observe(value) : histogram.observe(labels as LabelValues<L>, value))
  }

  /** Values read at scrape time from state kept elsewhere (a cache's own hit counter, a queue's length). */
  collect<L extends string = never>(
    name: string,
    help: string,
    type: 'counter' | 'gauge',
    read: () => number | Array<Sample<L>>,
    labelNames: readonly L[] = [],
  ): void {
    const samples = (): Array<Sample<L>> => {
      const value = read()
      return typeof value === 'number' ? [{ labels: {} as LabelValues<L>, value }] : value
    }
    const config = { name, help, labelNames, registers: [this.registry] }
    if (type === 'gauge') {
      new Gauge<L>({
        ...config,
        collect() {
          this.reset()
          for (const { labels, value } of samples()) this.set(labels, value)
        },
      })
    } else {
      new Counter<L>({
        ...config,
        collect() {
          // A count kept elsewhere: its current total, as one increment from zero.
          this.reset()
          for (const { labels, value } of samples()) this.inc(labels, value)
        },
      })
    }
  }

  /** The Prometheus text exposition of this gateway's series and the process's. */
  async render(): Promise<string> {
    const own = await this.registry.metrics()
    return this.process === undefined ? own : own + (await this.process.metrics())
  }
}
