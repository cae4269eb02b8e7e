import t from 'tap'
import fc from 'fast-check'
import { CoherentCache } from '../../src/cache/coherent-cache.js'

/**
 * The cache against a model of what it sits between: a store whose rows only move forward
 * (each commit bumps the row's revision), change messages that arrive late, twice, out of
 * order, or are lost (a lost message is a lost connection: the epoch changes, at some
 * point after the commit), fills that take a ticket, read the store, and land later, and
 * epoch flushes at any moment.
 *
 * The property, checked after every step: for each key, whatever the cache holds is no
 * older than
 *   - any change applied since the last flush (a read after a change applied never
 *     returns an older revision), and
 *   - the store as it was at the last flush (every fill that lands read after it, and a
 *     change message that arrives after a flush, however old, does not bring back a
 *     state the store had already left).
 */
type Op =
  | { type: 'commit'; key: number; deliveries: Array<'apply' | 'lose'> }
  | { type: 'fill'; key: number }
  | { type: 'get'; key: number }
  | { type: 'flush' }

const KEYS = 2

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      type: fc.constant('commit' as const),
      key: fc.nat(KEYS - 1),
      // none: the message is still in flight when the run ends (its writer is still waiting)
      deliveries: fc.array(fc.constantFrom<'apply' | 'lose'>('apply', 'apply', 'lose'), { minLength: 0, maxLength: 3 }),
    }),
  },
  { weight: 4, arbitrary: fc.record({ type: fc.constant('fill' as const), key: fc.nat(KEYS - 1) }) },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('get' as const), key: fc.nat(KEYS - 1) }) },
  { weight: 1, arbitrary: fc.constant({ type: 'flush' as const }) },
)

interface Model {
  cache: CoherentCache<{ revision: number }>
  store: number[]
  floor: number[]
  violations: string[]
  maxBytes?: number
}

/** States of different sizes: a newer state may no longer fit where its older one did, or fit nowhere. */
const bytesOf = (_key: string, value: { revision: number }) => 10 + (value.revision % 3) * 10

function check(model: Model, where: string): void {
  if (model.maxBytes !== undefined && model.cache.bytes > model.maxBytes) model.violations.push(`${where}: ${model.cache.bytes} bytes held, budget ${model.maxBytes}`)
  let sum = 0
  for (let key = 0; key < KEYS; key++) {
    const held = model.cache.get(String(key))
    if (held !== undefined && held.revision < model.floor[key]!) {
      model.violations.push(`${where}: key ${key} holds revision ${held.revision}, floor is ${model.floor[key]} (store at ${model.store[key]})`)
    }
    if (held !== undefined) sum += bytesOf(String(key), held)
  }
  // the cache sums its estimates itself: through replacements, evictions by count or bytes, and flushes
  if (model.maxBytes !== undefined && model.cache.bytes !== sum) model.violations.push(`${where}: ${model.cache.bytes} bytes counted, the entries held are ${sum}`)
}

function flush(model: Model, where: string): void {
  model.cache.flush()
  for (let key = 0; key < KEYS; key++) model.floor[key] = model.store[key]!
  check(model, where)
}

async function run(s: fc.Scheduler, ops: Op[], cacheMax: number, recentLimit: number, maxBytes?: number): Promise<Model> {
  const model: Model = {
    cache: new CoherentCache<{ revision: number }>(cacheMax, recentLimit, maxBytes === undefined ? undefined : { maxBytes, bytesOf }),
    maxBytes,
    store: new Array(KEYS).fill(0),
    floor: new Array(KEYS).fill(0),
    violations: [],
  }
  const step = () => s.schedule(Promise.resolve())
  const tasks = ops.map(async (op, index) => {
    await step() // every operation starts at a point of the scheduler's choosing
    const where = `op ${index} (${op.type})`
    switch (op.type) {
      case 'commit': {
        const revision = ++model.store[op.key]!
        await Promise.all(
          op.deliveries.map(async (delivery) => {
            await step()
            if (delivery === 'apply') {
              model.cache.apply(String(op.key), revision, { revision })
              model.floor[op.key] = Math.max(model.floor[op.key]!, revision)
              check(model, `${where} apply r${revision}`)
            } else {
              flush(model, `${where} lose r${revision}`)
            }
          }),
        )
        break
      }
      case 'fill': {
        const key = String(op.key)
        const ticket = model.cache.ticket()
        await step()
        const read = model.store[op.key]!
        await step()
        model.cache.fill(key, { revision: read }, ticket)
        check(model, `${where} fill r${read}`)
        break
      }
      case 'get':
        check(model, where)
        break
      case 'flush':
        flush(model, where)
        break
    }
  })
  await s.waitAll()
  await Promise.all(tasks)
  check(model, 'end')
  return model
}

t.test('no interleaving of fills, changes and flushes leaves an older state in place of a newer one', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.scheduler(),
      fc.array(opArb, { minLength: 1, maxLength: 14 }),
      fc.constantFrom(1, 2, 16),
      fc.constantFrom(1, 2, 8192),
      // a byte budget that holds no state, one of the smaller ones, or all of them
      fc.constantFrom(undefined, 5, 15, 35, 1000),
      async (s, ops, cacheMax, recentLimit, maxBytes) => {
        const model = await run(s, ops, cacheMax, recentLimit, maxBytes)
        if (model.violations.length) throw new Error(model.violations.join('\n') + '\n' + s.report())
      },
    ),
    { numRuns: 1500 },
  )
  t.pass('property held')
})

// The races the property covers, one by one, for whoever reads this file first.
t.test('a fill that read before a change applied does not land', async (t) => {
  const cache = new CoherentCache<{ revision: number }>(10)
  const ticket = cache.ticket()
  cache.apply('u', 2, { revision: 2 }) // the change overtakes the read
  t.equal(cache.fill('u', { revision: 1 }, ticket), false)
  t.equal(cache.get('u'), undefined)
  t.equal(cache.discardedFills, 1)
})

t.test('a fill from before an epoch change does not land', async (t) => {
  const cache = new CoherentCache<{ revision: number }>(10)
  const ticket = cache.ticket()
  cache.flush()
  t.equal(cache.fill('u', { revision: 1 }, ticket), false)
  t.equal(cache.get('u'), undefined)
})

t.test('a change for another key does not void a fill', async (t) => {
  const cache = new CoherentCache<{ revision: number }>(10)
  const ticket = cache.ticket()
  cache.apply('other', 5, { revision: 5 })
  t.equal(cache.fill('u', { revision: 1 }, ticket), true)
  t.same(cache.get('u'), { revision: 1 })
})

t.test('changes apply by revision, in any order, any number of times', async (t) => {
  const cache = new CoherentCache<{ revision: number; v: string }>(10)
  cache.fill('u', { revision: 1, v: 'a' }, cache.ticket())
  cache.apply('u', 3, { revision: 3, v: 'c' })
  cache.apply('u', 2, { revision: 2, v: 'b' })
  cache.apply('u', 3, { revision: 3, v: 'c' })
  t.same(cache.get('u'), { revision: 3, v: 'c' })
  cache.apply('u', 4) // no state: evict, the next read goes to the store
  t.equal(cache.get('u'), undefined)
})

t.test('a late change message does not bring back a state the store has left', async (t) => {
  // r2 was applied and then evicted (or flushed); r1, published late by a slow writer, arrives.
  const cache = new CoherentCache<{ revision: number }>(1)
  cache.fill('u', { revision: 1 }, cache.ticket())
  cache.apply('u', 2, { revision: 2 })
  cache.fill('x', { revision: 1 }, cache.ticket()) // evicts u
  cache.apply('u', 1, { revision: 1 })
  t.equal(cache.get('u'), undefined, 'an absent entry is not created from a message')
  cache.flush()
  cache.apply('u', 1, { revision: 1 })
  t.equal(cache.get('u'), undefined)
})

t.test('fills older than the forgotten window are refused', async (t) => {
  const cache = new CoherentCache<{ revision: number }>(10, 2)
  const ticket = cache.ticket()
  cache.apply('a', 1)
  cache.apply('b', 1)
  cache.apply('c', 1) // window full: forgets a and b at once
  t.equal(cache.fill('u', { revision: 1 }, ticket), false)
  const later = cache.ticket()
  t.equal(cache.fill('u', { revision: 1 }, later), true)
})

t.test('a byte budget evicts the least recently used entries by their size, and says what it holds', async (t) => {
  const cache = new CoherentCache<{ revision: number; name: string }>(100, 8192, { maxBytes: 100, bytesOf: (key, value) => key.length + value.name.length })
  cache.fill('a', { revision: 1, name: 'x'.repeat(39) }, cache.ticket()) // 40 bytes
  cache.fill('b', { revision: 1, name: 'x'.repeat(39) }, cache.ticket()) // 80
  t.equal(cache.bytes, 80)
  cache.get('a') // b is now the least recently used
  cache.fill('c', { revision: 1, name: 'x'.repeat(39) }, cache.ticket()) // 120 > 100: b goes
  t.equal(cache.bytes, 80)
  t.equal(cache.size, 2)
  t.equal(cache.get('b'), undefined)
  t.ok(cache.get('a'))
  t.ok(cache.get('c'))
  cache.apply('a', 2, { revision: 2, name: 'x'.repeat(200) }) // a newer state too big to hold: evicted, never kept stale
  t.equal(cache.get('a'), undefined)
  t.equal(cache.bytes, 40)
  t.equal(cache.fill('d', { revision: 1, name: 'x'.repeat(200) }, cache.ticket()), true, 'a fill too big to hold is not an error')
  t.equal(cache.get('d'), undefined)
  cache.flush()
  t.equal(cache.bytes, 0)
})
