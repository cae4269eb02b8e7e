/**
 * How far this node's wall clock is from PostgreSQL's, read as NTP does: the node's clock
 * at t0, the database's `clock_timestamp()`, the node's clock at t1; the database read its
 * clock somewhere between, so offset = db − (t0 + t1) / 2, give or take (t1 − t0) / 2.
 * On the embedded store (PGlite) the database's clock is the node's own: the offset is 0.
 */
export interface ClockReading {
  /** PostgreSQL's clock minus this node's, in ms: positive when the node's clock lags */
  offsetMs: number
  /** the offset is within ± this many ms: half the round trip, plus the clock's 1 ms resolution */
  uncertaintyMs: number
}

/** `ok`: within MAX_CLOCK_SKEW; `skewed`: certainly past it; `unknown`: no reading yet. */
export type ClockState = 'ok' | 'skewed' | 'unknown'

/** Readings per measurement; the one with the shortest round trip is kept (the least queueing in it). */
const SAMPLES = 3

export async function readOffset(databaseClock: () => Promise<number>, now: () => number = Date.now): Promise<ClockReading> {
  let best: ClockReading | undefined
  for (let i = 0; i < SAMPLES; i++) {
    const t0 = now()
    const db = await databaseClock()
    const t1 = now()
    const reading = { offsetMs: db - (t0 + t1) / 2, uncertaintyMs: (t1 - t0) / 2 + 1 }
    if (best === undefined || reading.uncertaintyMs < best.uncertaintyMs) best = reading
  }
  return best!
}

/**
 * Past the bound only when certainly so: even the nearest offset the reading allows is
 * beyond it. A slow round trip (a busy pool) widens the reading, and must not make a node
 * whose clock is right flap out of readiness.
 */
export const beyond = (reading: ClockReading, maxSkewMs: number): boolean => Math.abs(reading.offsetMs) - reading.uncertaintyMs > maxSkewMs

export interface ClockWatch {
  state(): ClockState
  /** the latest reading; undefined before the first */
  reading(): ClockReading | undefined
  /** resolves once the first measurement is done (whether it read the clock or failed) */
  readonly first: Promise<void>
  close(): void
}

export interface ClockWatchOptions {
  /** the database's clock now, ms since the epoch (`Store.clock`) */
  databaseClock: () => Promise<number>
  maxSkewSeconds: number
  logger: { warn(fields: object, message: string): void; info(fields: object, message: string): void }
  /** between measurements (default 30 s); 1 s while no reading has succeeded yet */
  everyMs?: number
  now?: () => number
}

const UNKNOWN_RETRY_MS = 1000

/**
 * Measures the offset at once and then every `everyMs`. Each change of state is logged once
 * (not per measurement, not per request): past the bound at warn, back within it at info; a
 * measurement that fails keeps the last reading and is logged once until one succeeds again.
 */
export function watchClock(options: ClockWatchOptions): ClockWatch {
  const maxSkewMs = options.maxSkewSeconds * 1000
  const log = options.logger
  let latest: ClockReading | undefined
  let state: ClockState = 'unknown'
  let failing = false
  let closed = false
  let timer: NodeJS.Timeout | undefined

  const fields = (reading: ClockReading) => ({
    offsetSeconds: round(reading.offsetMs / 1000),
    uncertaintySeconds: round(reading.uncertaintyMs / 1000),
    maxClockSkewSeconds: options.maxSkewSeconds,
  })

  async function measure(): Promise<void> {
    try {
      const reading = await readOffset(options.databaseClock, options.now)
      latest = reading
      failing = false
      const next: ClockState = beyond(reading, maxSkewMs) ? 'skewed' : 'ok'
      if (next === 'skewed' && state !== 'skewed') {
        log.warn(fields(reading), "this node's clock is off PostgreSQL's by more than MAX_CLOCK_SKEW: /readyz answers 503 until it is back within it, and revocations are kept only for clocks within it")
      } else if (next === 'ok' && state === 'skewed') {
        log.info(fields(reading), "this node's clock is back within MAX_CLOCK_SKEW of PostgreSQL's")
      }
      state = next
    } catch (error) {
      if (!failing) log.warn({ err: error instanceof Error ? error.message : String(error) }, "could not read PostgreSQL's clock; keeping the last reading")
      failing = true
    }
  }

  const schedule = () => {
    if (closed) return
    timer = setTimeout(() => void measure().then(schedule), state === 'unknown' ? UNKNOWN_RETRY_MS : (options.everyMs ?? 30_000))
    timer.unref()
  }
  const first = measure().then(schedule)

  return {
    state: () => state,
    reading: () => latest,
    first,
    close() {
      closed = true
      clearTimeout(timer)
    },
  }
}

const round = (seconds: number) => Math.round(seconds * 1e6) / 1e6
