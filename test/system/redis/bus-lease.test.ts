import t from 'tap'
import fc from 'fast-check'
import { CLOCK_DRIFT, SLACK_MS, Trust, writerWaitMs } from '../../../src/bus/subscription/lease.js'

/**
 * The lease and trust arithmetic of src/bus/subscription/lease.ts, on simulated clocks. One node and one
 * writer, each with a monotonic clock running at its own rate within ±CLOCK_DRIFT of real
 * time; pings, pongs (in order, after any delay), registrations, subscription losses and
 * stalls in any order. The writer publishes at some real instant; Redis delivers the
 * message to the node before the pong of any ping sent after it.
 *
 * What must hold: when the writer has waited `writerWaitMs` on its clock after its PUBLISH
 * was answered, a node that still trusts its cache holds a lease from a ping sent after the
 * message — so it has handled the message. And trust never rests on anything but a pong of
 * the current subscription and a registration on the same Redis instance.
 */
type Step =
  | { op: 'ping' }
  | { op: 'pong' }
  | { op: 'wait'; ms: number }
  | { op: 'register'; runId: 'r1' | 'r2'; delayMs: number }
  | { op: 'subscribe'; runId: 'r1' | 'r2' }
  | { op: 'lose' }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Step>({ op: 'ping' }) },
  { weight: 4, arbitrary: fc.constant<Step>({ op: 'pong' }) },
  { weight: 5, arbitrary: fc.integer({ min: 0, max: 400 }).map<Step>((ms) => ({ op: 'wait', ms })) },
  { weight: 2, arbitrary: fc.record({ runId: fc.constantFrom<'r1' | 'r2'>('r1', 'r2'), delayMs: fc.integer({ min: 0, max: 300 }) }).map<Step>((r) => ({ op: 'register', ...r })) },
  { weight: 1, arbitrary: fc.constantFrom<'r1' | 'r2'>('r1', 'r2').map<Step>((runId) => ({ op: 'subscribe', runId })) },
  { weight: 1, arbitrary: fc.constant<Step>({ op: 'lose' }) },
)

const rate = fc.double({ min: 1 - CLOCK_DRIFT, max: 1 + CLOCK_DRIFT, noNaN: true })

t.test('for any pings, pongs, stalls, losses and clock rates, trust never outlives its proof', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 50, max: 1000 }),
      rate,
      rate,
      fc.array(step, { maxLength: 80 }),
      fc.nat(79),
      fc.integer({ min: 0, max: 3 }),
      (leaseMs, nodeRate, writerRate, steps, publishAt, replyDelayMs) => {
        const trust = new Trust(leaseMs, leaseMs * 3)
        let real = 0
        const nodeClock = () => real * nodeRate
        // pings on the current subscription, with the real time each was sent
        let pings: number[] = []
        let publishedAt: number | undefined
        let resolveAt: number | undefined
        const registrations: Array<{ runId: string; sentAtReal: number }> = []
        let subscribedRunId: string | undefined

        const check = (): boolean => {
          if (!trust.trustedAt(nodeClock())) return true
          // The lease's ping was sent on this subscription within leaseMs of the node's clock…
          const vouching = trust.vouchingPing() / nodeRate
          if (!(nodeClock() < trust.vouchingPing() + leaseMs)) return false
          // …a registration on the subscribed instance is alive on Redis's (real) clock…
          const alive = registrations.some((r) => r.runId === subscribedRunId && real < r.sentAtReal + leaseMs * 3)
          if (!alive) return false
          // …and once the writer is done waiting, the lease comes from a ping sent after the message.
          if (resolveAt !== undefined && publishedAt !== undefined && real >= resolveAt && vouching <= publishedAt) return false
          return true
        }

        for (const [i, s] of steps.entries()) {
          if (i === publishAt) {
            publishedAt = real
            // The writer's wait starts when its PUBLISH is answered, and runs on its own clock.
            resolveAt = real + replyDelayMs + writerWaitMs(leaseMs) / writerRate
          }
          switch (s.op) {
            case 'ping':
              if (subscribedRunId !== undefined) {
                pings.push(real)
                trust.pingSent(nodeClock())
              }
              break
            case 'pong':
              if (pings.length) {
                pings.shift()
                trust.pongReceived()
              }
              break
            case 'wait':
              real += s.ms
              break
            case 'register': {
              // The script ran after it was sent; the node learns of it delayMs later.
              registrations.push({ runId: s.runId, sentAtReal: real })
              const sentAt = nodeClock()
              real += s.delayMs
              trust.registered(s.runId, sentAt)
              break
            }
            case 'subscribe':
              subscribedRunId = s.runId
              pings = []
              trust.subscribed(s.runId)
              break
            case 'lose':
              subscribedRunId = undefined
              pings = []
              trust.lost()
              break
          }
          if (!check()) return false
          // and at every instant the writer may look, not only between steps
          if (resolveAt !== undefined && real < resolveAt) {
            const saved = real
            real = resolveAt
            const ok = check()
            real = saved
            if (!ok) return false
          }
        }
        return true
      },
    ),
    { numRuns: 3000 },
  )
  t.pass('3000 random histories')
})

t.test('the bounds themselves', async (t) => {
  for (const leaseMs of [50, 500, 10_000]) {
    const wait = writerWaitMs(leaseMs)
    // the slowest writer clock still waits longer than the fastest node's lease, in real time
    t.ok(wait / (1 + CLOCK_DRIFT) >= leaseMs / (1 - CLOCK_DRIFT), `lease ${leaseMs} ms: the writer waits ${wait} ms`)
    t.ok(wait <= leaseMs * 1.03 + SLACK_MS + 1, 'and not much longer')
  }
  const trust = new Trust(100, 300)
  trust.subscribed('r1')
  trust.pingSent(0)
  trust.pongReceived()
  t.equal(trust.trustedAt(1), false, 'no trust without a registration')
  trust.registered('r2', 0)
  t.equal(trust.trustedAt(1), false, 'nor with one on another Redis instance')
  trust.registered('r1', 0)
  t.equal(trust.trustedAt(1), true)
  t.equal(trust.trustedAt(100), false, 'the lease ends leaseMs after the ping was sent')
  trust.lost()
  t.equal(trust.trustedAt(1), false, 'and with the subscription, at once')
})
