/**
 * Heap per cached user: fills the node's user cache (src/cache/states.ts) with N users as
 * a verification would (key = the token's `sub`, value = the row as the store returns it,
 * compacted by states.ts), forcing GC around it. Then heap per revoked jti: the node's
 * revoked map (src/cache/revoked-tokens.ts) filled with M revocations as the bus delivers
 * them.
 *
 *   node --expose-gc dist/bench/memory.js [--users 1000000] [--revoked 1000000] [--json]
 */
import { parseArgs } from 'node:util'
import { randomBytes } from 'node:crypto'
import { createStates } from '../src/cache/states.js'
import { createRevokedTokens } from '../src/cache/revoked-tokens.js'
import { createMemoryBus } from '../src/bus/memory-bus.js'
import type { Store, UserRecord } from '../src/store/store.js'
import { createKeyring } from '../src/jwt/keyring.js'

export interface MemoryResult {
  users: number
  cacheSize: number
  cached: number
  /** (heap full − heap before the caches existed) / users */
  heapBytesPerUser: number
  /** (heap full − heap of the empty caches) / users: the entries alone */
  entryBytesPerUser: number
  emptyCachesMb: number
  heapUsedMb: number
  rssMb: number
  fillSeconds: number
  /** the JWT verifier's own cache (src/jwt/keyring.ts, fast-jwt), full: a fixed cost per node */
  verifierCache?: { tokens: number; mb: number; bytesPerToken: number }
  /** the revoked-jti map (src/cache/revoked-tokens.ts) */
  revokedTokens?: RevokedMemory
}

export interface RevokedMemory {
  revoked: number
  mb: number
  bytesPerJti: number
  fillSeconds: number
}

const gc = (globalThis as { gc?: () => void }).gc

function collect(): void {
  if (!gc) throw new Error('run with node --expose-gc')
  for (let i = 0; i < 3; i++) gc()
}

/** A fresh flat string, as pg's row parser or JSON.parse of a token produce one. */
function fresh(s: string): string {
  return Buffer.from(s, 'latin1').toString('latin1')
}

/**
 * `sharedId` simulates the change proposed in RESULTS.md (states.ts keeps the lookup key as
 * the cached user's id instead of the row's own copy of the same 36 characters).
 */
export async function measureStatesMemory(users: number, cacheSize = users, sharedId = false): Promise<MemoryResult> {
  const h = randomBytes(12).toString('hex')
  const prefix = `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-`
  const companyId = '6f1b3c2a-8d4e-4f5a-9b6c-7d8e9f0a1b2c'
  const agentId = '0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d'
  const now = new Date()
  // what store.getUsers returns: fresh row objects with fresh strings, as the pg driver makes them
  const row = (id: string): UserRecord => ({
      id: sharedId ? id : fresh(id),
      companyId: fresh(companyId),
      externalId: fresh('user-' + id.slice(24)),
      agentId: fresh(agentId),
      tokenVersion: 0,
      active: true,
      revision: 0,
      createdAt: now,
      updatedAt: now,
    })
  const store = { getUsers: async (ids: string[]) => ids.map(row), liveRevokedTokens: async () => [] } as unknown as Store

  collect()
  const before = process.memoryUsage().heapUsed
  const states = createStates(store, createMemoryBus(), cacheSize)
  collect()
  const empty = process.memoryUsage().heapUsed
  const started = process.hrtime.bigint()
  for (let i = 0; i < users; i++) {
    // the key is the token's `sub`, a string of its own (JSON.parse of the payload)
    await states.user(fresh(prefix + i.toString(16).padStart(12, '0')))
  }
  const fillSeconds = Number(process.hrtime.bigint() - started) / 1e9
  collect()
  const full = process.memoryUsage()
  const cached = states.caches.users.size
  states.close()
  return {
    users,
    cacheSize,
    cached,
    heapBytesPerUser: (full.heapUsed - before) / cached,
    entryBytesPerUser: (full.heapUsed - empty) / cached,
    emptyCachesMb: (empty - before) / 2 ** 20,
    heapUsedMb: full.heapUsed / 2 ** 20,
    rssMb: full.rss / 2 ** 20,
    fillSeconds,
  }
}

/** Heap held by the keyring's verifier cache once `tokens` distinct tokens went through it. */
export function measureVerifierCache(tokens: number): { tokens: number; mb: number; bytesPerToken: number } {
  const secret = randomBytes(48).toString('base64url')
  const keyring = createKeyring({ keys: [], issuer: undefined, audience: undefined, clockToleranceSeconds: 0 }, [{ alg: 'HS256', secret }])
  const iat = Math.floor(Date.now() / 1000)
  const companyId = '6f1b3c2a-8d4e-4f5a-9b6c-7d8e9f0a1b2c'
  const agentId = '0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d'
  const sign = (i: number) =>
    keyring.sign({ sub: `7c9e6679-7425-40de-944b-${i.toString(16).padStart(12, '0')}`, tokenVersion: 0, companyId, agentId, iat, exp: iat + 86400, jti: randomBytes(16).toString('hex') })
  keyring.verify(sign(0))
  collect()
  const before = process.memoryUsage().heapUsed
  for (let i = 0; i < tokens; i++) keyring.verify(sign(i))
  collect()
  const delta = process.memoryUsage().heapUsed - before
  return { tokens, mb: delta / 2 ** 20, bytesPerToken: delta / tokens }
}

/**
 * Heap held by the revoked map once `revoked` jtis are in it, each a fresh UUID string (as
 * JSON.parse of a bus message makes it) with an exp a day ahead.
 */
export async function measureRevokedTokens(revoked: number): Promise<RevokedMemory> {
  const h = randomBytes(12).toString('hex')
  const prefix = `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-`
  const exp = Math.floor(Date.now() / 1000) + 86400
  collect()
  const before = process.memoryUsage().heapUsed
  const set = createRevokedTokens({ load: async () => [], read: async () => false, trusted: () => true, graceSeconds: 0 })
  await new Promise((resolve) => setImmediate(resolve)) // the (empty) load lands
  const started = process.hrtime.bigint()
  for (let i = 0; i < revoked; i++) set.add({ jti: fresh(prefix + i.toString(16).padStart(12, '0')), exp: exp + (i % 3600) })
  const fillSeconds = Number(process.hrtime.bigint() - started) / 1e9
  collect()
  const delta = process.memoryUsage().heapUsed - before
  if (set.size !== revoked || set.isRevoked(prefix + '000000000000') !== true) throw new Error('the revoked map does not hold what was added')
  set.close()
  return { revoked, mb: delta / 2 ** 20, bytesPerJti: delta / revoked, fillSeconds }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      users: { type: 'string', default: '1000000' },
      revoked: { type: 'string', default: '1000000' },
      'cache-size': { type: 'string' },
      json: { type: 'boolean', default: false },
      'shared-id': { type: 'boolean', default: false },
    },
  })
  const users = Number(values.users)
  const result = await measureStatesMemory(users, values['cache-size'] ? Number(values['cache-size']) : users, values['shared-id'])
  result.verifierCache = measureVerifierCache(Math.min(users, 100_000))
  result.revokedTokens = await measureRevokedTokens(Number(values.revoked))
  if (values.json) console.log(JSON.stringify(result))
  else
    console.log(
      `${result.cached.toLocaleString('en-US')} cached users: ${result.heapBytesPerUser.toFixed(0)} B heap/user ` +
        `(entries alone ${result.entryBytesPerUser.toFixed(0)} B, empty caches ${result.emptyCachesMb.toFixed(1)} MB), ` +
        `heap ${result.heapUsedMb.toFixed(0)} MB, RSS ${result.rssMb.toFixed(0)} MB, filled in ${result.fillSeconds.toFixed(1)} s; ` +
        `JWT verifier cache with ${result.verifierCache!.tokens.toLocaleString('en-US')} tokens: ${result.verifierCache!.mb.toFixed(0)} MB (${result.verifierCache!.bytesPerToken.toFixed(0)} B/token); ` +
        `${result.revokedTokens.revoked.toLocaleString('en-US')} revoked jtis: ${result.revokedTokens.mb.toFixed(0)} MB (${result.revokedTokens.bytesPerJti.toFixed(0)} B/jti, added in ${result.revokedTokens.fillSeconds.toFixed(2)} s)`,
    )
}
