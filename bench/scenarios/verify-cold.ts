/**
 * verify-cold: random users of all the unchanging ones against a node caching a tenth of
 * them (every token signed before the run, so the generator does no HMAC during it). The
 * embedded store admits one process, and a node without Redis claims its PostgreSQL database
 * for itself: then the cold node replaces the main one, so it runs after every other part.
 */
import { number } from '../lib/args.js'
import { runLoad } from '../lib/load.js'
import { defineKitPart } from '../lib/scenario.js'
import { verifyCold } from '../lib/workloads.js'

export default defineKitPart({
  name: 'verify-cold',
  description: 'verifications of random users against a node caching a tenth of them (cache misses batched)',
  options: {
    coldCacheSize: number("the cold node's CACHE_SIZE (default: a tenth of the users, at least 100)"),
  },
  smoke: true,
  async after(kit, opts) {
    const { rounds } = kit.opts
    if (kit.remote) {
      for (let round = 1; round <= rounds; round++) await kit.measured('verify-cold', `verify-cold r${round}`, () => verifyCold(kit.ds), kit.urls)
      return
    }
    const cacheSize = (kit.record.coldCacheSize = opts.coldCacheSize ?? Math.max(100, Math.floor(opts.users / 10)))
    const alone = kit.store === 'embedded' || !opts.redis
    if (alone && kit.main) await kit.stopProc(kit.main)
    const cold = await kit.startNode('cold node', { CACHE_SIZE: String(cacheSize), REDIS_URL: opts.redis ? opts.redisUrl : undefined })
    // One answer before the rounds: a node just started opens its store connections and
    // compiles its code on its first requests, which on a loaded machine took longer than a
    // whole --smoke round (0 responses, no numbers). One user cached of the cold set changes nothing else.
    await runLoad(verifyCold(kit.ds), { label: 'verify-cold: a first answer', urls: [cold.url], connections: 1, durationS: 120, amount: 1, progress: null })
    for (let round = 1; round <= rounds; round++) await kit.measured('verify-cold', `verify-cold r${round}`, () => verifyCold(kit.ds), [cold.url], cold)
    await kit.stopProc(cold)
    if (alone) kit.main = undefined
  },
  rows: [{ key: 'verify-cold', label: 'verify-cold' }],
})
