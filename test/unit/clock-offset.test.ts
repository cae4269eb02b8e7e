/**
 * clock/offset.ts: the NTP-style reading of the node's clock against the database's, the
 * bound (past it only when certainly so), and a watch that logs each change of state once.
 * A fake database clock and a fake node clock stand in for PostgreSQL and Date.now.
 */
import t from 'tap'
import { beyond, readOffset, watchClock } from '../../src/clock/offset.js'
import { sleep, waitFor } from '../support/poll.js'

/** A node clock that advances `roundTrips[i]` ms during the i-th database read, and a database `offsetMs` ahead of it. */
function clocks(offsetMs: number, roundTrips: number[]) {
  let nodeNow = 1_000_000
  let i = 0
  return {
    now: () => nodeNow,
    databaseClock: async () => {
      const trip = roundTrips[i++ % roundTrips.length]!
      // the database reads its clock in the middle of the round trip
      nodeNow += trip / 2
      const db = nodeNow + offsetMs
      nodeNow += trip / 2
      return db
    },
  }
}

t.test('a reading: offset = db − (t0 + t1) / 2, within half the round trip (+1 ms); the shortest of three round trips is kept', async (t) => {
  const { now, databaseClock } = clocks(-30_000, [40, 4, 20])
  t.strictSame(await readOffset(databaseClock, now), { offsetMs: -30_000, uncertaintyMs: 3 })
})

t.test('past the bound only when even the nearest offset the reading allows is beyond it', async (t) => {
  t.equal(beyond({ offsetMs: 1500, uncertaintyMs: 400 }, 1000), true)
  t.equal(beyond({ offsetMs: -1500, uncertaintyMs: 400 }, 1000), true, 'either way')
  t.equal(beyond({ offsetMs: 1300, uncertaintyMs: 400 }, 1000), false, 'a wide reading may be within')
  t.equal(beyond({ offsetMs: 0, uncertaintyMs: 5000 }, 1000), false)
})

t.test('the watch: state, one log line per change (not per reading), a failed reading keeps the last one, closed timer', async (t) => {
  let offsetMs = 0
  let fail = false
  const lines: Array<[string, object, string]> = []
  const logger = { warn: (fields: object, message: string) => void lines.push(['warn', fields, message]), info: (fields: object, message: string) => void lines.push(['info', fields, message]) }
  const watch = watchClock({
    databaseClock: async () => {
      if (fail) throw new Error('connection refused')
      return Date.now() + offsetMs
    },
    maxSkewSeconds: 1,
    logger,
    everyMs: 5,
  })
  t.teardown(() => watch.close())
  t.equal(watch.state(), 'unknown', 'before the first reading')
  await watch.first
  t.equal(watch.state(), 'ok')
  t.ok(Math.abs(watch.reading()!.offsetMs) < 50)

  offsetMs = -5000
  await waitFor('the watch to see the skew', () => watch.state(), { until: (state) => state === 'skewed', timeoutMs: 2000, everyMs: 5 })
  await sleep(50)
  t.equal(lines.length, 1, 'one line for the change, however many readings')
  t.equal(lines[0]![0], 'warn')
  t.match(lines[0]![1], { maxClockSkewSeconds: 1 })
  t.match(lines[0]![2], /MAX_CLOCK_SKEW/)
  t.ok(Math.abs((lines[0]![1] as { offsetSeconds: number }).offsetSeconds + 5) < 0.05, 'the offset, in seconds')

  fail = true
  await sleep(50)
  t.equal(watch.state(), 'skewed', 'a failed reading keeps the last one')
  t.equal(lines.filter(([, , message]) => /could not read/.test(message)).length, 1, 'failures: one line until a reading succeeds')

  fail = false
  offsetMs = 0
  await waitFor('the watch to see the clock back', () => watch.state(), { until: (state) => state === 'ok', timeoutMs: 2000, everyMs: 5 })
  t.match(lines.at(-1), ['info', {}, /back within MAX_CLOCK_SKEW/])

  watch.close()
  const count = lines.length
  offsetMs = -5000
  await sleep(50)
  t.equal(watch.state(), 'ok', 'closed: no more readings')
  t.equal(lines.length, count)
})
