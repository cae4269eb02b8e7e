/**
 * The fair gate (src/stream/fair-gate.ts) the event hub reads backlogs through: never more
 * jobs at once than its concurrency, and each key one turn a round, however many jobs another
 * key queued first.
 */
import t from 'tap'
import { createFairGate } from '../../src/stream/fair-gate.js'

const deferred = () => {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

t.test('one key with many jobs waiting does not keep another waiting: turns alternate', async (t) => {
  const gate = createFairGate(1)
  const order: string[] = []
  const job = (name: string) => async () => void order.push(name)
  const runs = [...['a1', 'a2', 'a3', 'a4'].map((name) => gate.run('a', job(name))), gate.run('b', job('b1')), gate.run('b', job('b2'))]
  await Promise.all(runs)
  t.strictSame(order, ['a1', 'b1', 'a2', 'b2', 'a3', 'a4'])
})

t.test('never more jobs at once than the concurrency; a failed job frees its turn', async (t) => {
  const gate = createFairGate(2)
  let running = 0
  let most = 0
  const held = Array.from({ length: 6 }, deferred)
  const runs = held.map(({ promise }, i) =>
    gate.run(`k${i % 3}`, async () => {
      running++
      most = Math.max(most, running)
      await promise
      running--
      if (i === 0) throw new Error('failed')
      return i
    }),
  )
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(running, 2)
  t.equal(gate.waiting(), 4)
  for (const { resolve } of held) resolve()
  const settled = await Promise.allSettled(runs)
  t.equal(most, 2)
  t.equal(settled[0]!.status, 'rejected', 'the failure reaches its caller')
  t.strictSame(settled.slice(1).map((s) => (s.status === 'fulfilled' ? s.value : undefined)), [1, 2, 3, 4, 5])
  t.equal(gate.waiting(), 0)
})
