/**
 * A latency histogram with microsecond resolution (autocannon's own rounds to whole
 * milliseconds, too coarse for a 2 ms p99 target). Linear 10 µs buckets up to 100 ms,
 * then 1 ms buckets up to 60 s; recording is one array increment.
 */
const FINE_US = 10
const FINE_LIMIT_US = 100_000
const COARSE_US = 1000
const COARSE_LIMIT_US = 60_000_000
const FINE_BUCKETS = FINE_LIMIT_US / FINE_US
const COARSE_BUCKETS = (COARSE_LIMIT_US - FINE_LIMIT_US) / COARSE_US

export class Histogram {
  private readonly counts = new Float64Array(FINE_BUCKETS + COARSE_BUCKETS + 1)
  count = 0
  private sum = 0
  max = 0

  /** Records one value in milliseconds. */
  record(ms: number): void {
    const us = ms * 1000
    let bucket: number
    if (us < FINE_LIMIT_US) bucket = Math.floor(us / FINE_US)
    else if (us < COARSE_LIMIT_US) bucket = FINE_BUCKETS + Math.floor((us - FINE_LIMIT_US) / COARSE_US)
    else bucket = FINE_BUCKETS + COARSE_BUCKETS
    this.counts[bucket]!++
    this.count++
    this.sum += ms
    if (ms > this.max) this.max = ms
  }

  merge(other: Histogram): void {
    for (let i = 0; i < this.counts.length; i++) this.counts[i]! += other.counts[i]!
    this.count += other.count
    this.sum += other.sum
    if (other.max > this.max) this.max = other.max
  }

  get mean(): number {
    return this.count === 0 ? NaN : this.sum / this.count
  }

  /** The value (ms, upper edge of its bucket) below which `p` percent of the samples lie. */
  percentile(p: number): number {
    if (this.count === 0) return NaN
    const rank = Math.max(1, Math.ceil((p / 100) * this.count))
    let seen = 0
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i]!
      if (seen >= rank) {
        const upperUs = i < FINE_BUCKETS ? (i + 1) * FINE_US : FINE_LIMIT_US + (i - FINE_BUCKETS + 1) * COARSE_US
        return Math.min(upperUs / 1000, this.max)
      }
    }
    return this.max
  }
}
