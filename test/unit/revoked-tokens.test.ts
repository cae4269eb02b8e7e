import t from 'tap'
import fc from 'fast-check'
import { randomUUID } from 'node:crypto'
import { createRevocationFilter } from '../../src/cache/revocation-filter.js'
import { createRevokedTokens, type RevokedTokensOptions } from '../../src/cache/revoked-tokens.js'

/**
 * The node's revoked tokens (src/cache/revoked-tokens.ts) against a model of the store it
 * loads from in pages, with the loads' pages answered whenever the test says, revocations
 * committed at any moment, their messages delivered, late or lost (a lost one: the bus no
 * longer vouches for the node until its epoch changes and it reloads), and rebuilds.
 */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve))

function harness(options: Partial<RevokedTokensOptions> = {}) {
  const store = new Set<string>()
  const pending: Array<{ after: string; limit: number; resolve: (page: string[]) => void; reject: (error: Error) => void }> = []
  let inFlight = 0
  let mostInFlight = 0
  let pagesAsked = 0
  let trusted = true
  let probing = false
  const revoked = createRevokedTokens({
    loadPage: (after, limit) => {
      pagesAsked++
      mostInFlight = Math.max(mostInFlight, ++inFlight)
      return new Promise((resolve, reject) => pending.push({ after, limit, resolve, reject })).finally(() => inFlight--) as Promise<string[]>
    },
    // A probe's read says "not revoked", so that it confirms nothing: probing changes no state.
    read: async (jti) => !probing && store.has(jti),
    trusted: () => trusted,
    filterBytes: 4096,
    pageSize: 3,
    rebuildAfterAdds: 4,
    retryAfterMs: 5,
    ...options,
  })
  return {
    store,
    revoked,
    pending,
    setTrusted: (value: boolean) => void (trusted = value),
    /** the answer without I/O, or 'read' when the node would ask the store */
    probe(jti: string): boolean | 'read' {
      probing = true
      const answer = revoked.isRevoked(jti)
      probing = false
      return answer instanceof Promise ? 'read' : answer
    },
    stats: () => ({ mostInFlight, pagesAsked }),
    /** answers the oldest page asked for, as the table is now (a keyset page over a live table) */
    async answerPage() {
      const page = pending.shift()
      if (!page) return false
      page.resolve([...store].filter((jti) => jti > page.after).sort().slice(0, page.limit))
      await tick()
      return true
    },
    async failPage() {
      const page = pending.shift()
      if (!page) return false
      page.reject(new Error('store away'))
      await tick()
      return true
    },
    async loadAll() {
      while (await this.answerPage());
    },
  }
}

t.test('a jti never added is cleared by the filter alone; every one added is held (no false negatives)', async (t) => {
  const filter = createRevocationFilter(1 << 20)
  const added = Array.from({ length: 50_000 }, () => randomUUID())
  filter.addAll(added)
  t.equal(added.filter((jti) => !filter.mightHold(jti)).length, 0, 'every jti added is "maybe held"')
  const others = Array.from({ length: 100_000 }, () => randomUUID())
  const falsePositives = others.filter((jti) => filter.mightHold(jti)).length / others.length
  const estimated = filter.falsePositiveRate()
  t.ok(estimated < 1e-3, `1 MiB for 50,000 jtis: estimated false positives ${estimated.toExponential(2)}`)
  t.ok(falsePositives <= Math.max(5 * estimated, 1e-4), `measured ${falsePositives} within the estimate's reach`)
  t.equal(filter.bytes, 1 << 20, 'the filter holds its size, whatever was added')
})

t.test('until the first load is in, every question is a store read, and the node is not "loaded"', async (t) => {
  const h = harness()
  h.store.add('a')
  h.store.add('b')
  t.equal(h.revoked.loaded, false)
  t.equal(await h.revoked.isRevoked('a'), true)
  t.equal(await h.revoked.isRevoked('z'), false)
  t.equal(h.revoked.stats().storeReads, 2, 'both read the store')
  await h.loadAll()
  t.equal(h.revoked.loaded, true)
  t.equal(h.revoked.complete, true)
  t.equal(h.revoked.isRevoked('z'), false, 'then a jti the filter never saw is answered without I/O')
  t.equal(await h.revoked.isRevoked('b'), true, 'a revoked one is confirmed by the store once...')
  const reads = h.revoked.stats().storeReads
  t.equal(h.revoked.isRevoked('b'), true, '...and remembered: answered without I/O after that')
  t.equal(h.revoked.stats().storeReads, reads)
  h.revoked.close()
})

t.test('one load at a time: questions never start one, a failed load is tried again on a timer', async (t) => {
  const h = harness({ retryAfterMs: 200 })
  for (let i = 0; i < 10; i++) h.store.add(`jti-${i}`)
  await h.failPage()
  t.equal(h.pending.length, 0, 'the failed load is not tried again at once')
  for (let i = 0; i < 50; i++) await h.revoked.isRevoked(`jti-${i % 12}`)
  t.equal(h.stats().pagesAsked, 1, '50 questions while the store failed started no load')
  await new Promise((resolve) => setTimeout(resolve, 400))
  t.equal(h.pending.length, 1, 'the timer tried again')
  h.revoked.reload()
  h.revoked.reload()
  t.equal(h.pending.length, 1, 'a reload while a load runs does not start a second one')
  await h.loadAll()
  t.equal(h.stats().mostInFlight, 1, 'never two pages in flight')
  t.equal(h.revoked.complete, true)
  h.revoked.close()
})

t.test('a load that began before a reload is not trusted: it starts over', async (t) => {
  const h = harness()
  h.store.add('a')
  await h.answerPage()
  t.equal(h.revoked.complete, true)
  h.revoked.reload()
  t.equal(h.revoked.complete, false)
  h.store.add('b') // its message was lost: only a load that began after the reload may vouch for it
  t.equal(h.pending.length, 1)
  h.revoked.reload()
  await h.loadAll()
  t.equal(h.revoked.complete, true)
  t.equal(await h.revoked.isRevoked('b'), true)
  h.revoked.close()
})

t.test('a rebuild loads a fresh filter beside the one that answers; what arrives meanwhile is in both', async (t) => {
  const h = harness()
  await h.loadAll()
  for (const jti of ['a', 'b', 'c', 'd', 'e']) {
    h.store.add(jti)
    h.revoked.add({ jti, exp: 0 })
  }
  t.equal(h.pending.length, 1, 'past rebuildAfterAdds a rebuild starts')
  t.equal(h.revoked.complete, true, 'and the filter that answers stays complete meanwhile')
  await h.answerPage() // a, b, c: the first page
  h.store.add('0') // below the walk's position: only its message can bring it
  h.revoked.add({ jti: '0', exp: 0 })
  await h.loadAll()
  t.equal(h.revoked.stats().loads, 2, 'the rebuild finished')
  t.equal(await h.revoked.isRevoked('0'), true, 'the revocation that arrived during the rebuild is held')
  h.revoked.close()
})

/**
 * The property: at every step, a jti revoked in the store is never answered "not revoked"
 * without I/O — unless its message is still in flight while the bus vouches for the node
 * (the bus's own guarantee covers that window: the writer waits for the acknowledgement).
 */
type Op =
  | { type: 'revoke'; jti: number; delivery: 'now' | 'lost' | 'late' }
  | { type: 'deliverLate' }
  | { type: 'reload' }
  | { type: 'page' }
  | { type: 'failPage' }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ type: fc.constant('revoke' as const), jti: fc.nat(40), delivery: fc.constantFrom<'now' | 'lost' | 'late'>('now', 'now', 'late', 'lost') }) },
  { weight: 2, arbitrary: fc.constant({ type: 'deliverLate' as const }) },
  { weight: 2, arbitrary: fc.constant({ type: 'reload' as const }) },
  { weight: 3, arbitrary: fc.constant({ type: 'page' as const }) },
  { weight: 1, arbitrary: fc.constant({ type: 'failPage' as const }) },
)

t.test('property: no revoked jti is cleared without I/O, whatever the order of loads, messages and losses', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { maxLength: 80 }), async (ops) => {
      const h = harness({ retryAfterMs: 1 })
      const late: string[] = []
      // lost: the bus stops vouching until the epoch changes (a reload)
      for (const op of ops) {
        switch (op.type) {
          case 'revoke': {
            const jti = `j${String(op.jti).padStart(2, '0')}`
            h.store.add(jti)
            if (op.delivery === 'now') h.revoked.add({ jti, exp: 0 })
            else if (op.delivery === 'late') late.push(jti)
            else h.setTrusted(false)
            break
          }
          case 'deliverLate':
            for (const jti of late.splice(0)) h.revoked.add({ jti, exp: 0 })
            break
          case 'reload':
            h.revoked.reload()
            h.setTrusted(true)
            break
          case 'page':
            await h.answerPage()
            break
          case 'failPage':
            await h.failPage()
            await new Promise((resolve) => setTimeout(resolve, 3))
            break
        }
        for (const jti of h.store) {
          if (late.includes(jti)) continue
          if (h.probe(jti) === false) throw new Error(`${jti} is revoked in the store but answered "not revoked" without I/O`)
        }
        if (h.stats().mostInFlight > 1) throw new Error('two pages in flight')
      }
      h.revoked.close()
    }),
    { numRuns: 1000 },
  )
})
