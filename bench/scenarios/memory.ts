/**
 * memory: heap per cached user, in this process (started with --expose-gc): fills the node's
 * user cache (src/cache/states.ts) with N users as a verification would (key = the token's
 * `sub`, value = the row as the store returns it, compacted by states.ts), forcing GC around
 * it. Then the memory held for M revocations as the bus delivers them
 * (src/cache/revoked-tokens.ts): a fixed-size filter, so the same for any M; and the JWT
 * verifier's own cache, full.
 *
 * With `--external-id ascii255|cjk255` every user's external id is 255 characters (the
 * longest the API takes), and `--user-ids` also fills the (company, external id) → user id
 * index as token issuance does. The cache's own estimate (src/cache/sizes.ts) is printed
 * next to the heap it is calibrated against.
 */
import { randomBytes } from 'node:crypto'
import { createStates } from '../../src/cache/states.js'
import { userIdBytes } from '../../src/cache/sizes.js'
import { createRevokedTokens } from '../../src/cache/revoked-tokens.js'
import { createMemoryBus } from '../../src/bus/memory-bus.js'
import type { Store, UserRecord } from '../../src/store/store.js'
import { createKeyring } from '../../src/jwt/keyring.js'
import { VARIABLES } from '../../src/config/variables.js'
import { choice, flag, number } from '../lib/args.js'
import { defineScenario } from '../lib/scenario.js'

/** CACHE_MAX_BYTES's default: what a node holds unless told otherwise */
const DEFAULT_MAX_BYTES = Number(VARIABLES.CACHE_MAX_BYTES.default)

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
  externalIds: ExternalIds
  /** the users cache's own estimate of what it holds, per user (src/cache/sizes.ts) */
  estimatedBytesPerUser: number
  /** with --user-ids: heap and estimate per entry of the (company, external id) index */
  userIds?: { entries: number; heapBytesPerEntry: number; estimatedBytesPerEntry: number }
  /** CACHE_MAX_BYTES of the run (--max-bytes) */
  maxBytes: number
  /** the JWT verifier's own cache (src/jwt/keyring.ts, fast-jwt), full: a fixed cost per node */
  verifierCache?: { tokens: number; mb: number; bytesPerToken: number }
  /** the revoked-jti filter (src/cache/revoked-tokens.ts) */
  revokedTokens?: RevokedMemory
}

export interface RevokedMemory {
  revoked: number
  mb: number
  bytesPerJti: number
  fillSeconds: number
}

export type ExternalIds = 'short' | 'ascii255' | 'cjk255'

/** The i-th user's external id: `user-<12 hex>` (17 characters), or 255 ASCII or CJK characters. */
function externalIdOf(kind: ExternalIds, i: number): string {
  const tail = i.toString(16).padStart(12, '0')
  if (kind === 'short') return 'user-' + tail
  if (kind === 'ascii255') return 'u'.repeat(243) + tail
  // 243 CJK ideographs, then the number: every character two bytes in V8
  let cjk = ''
  for (let c = 0; c < 243; c++) cjk += String.fromCharCode(0x4e00 + ((c * 7 + i) % 20000))
  return cjk + tail
}

/** Every entry of one run has the same estimate: the index's entry count is its bytes over that. */
function userIdBytesOf(kind: ExternalIds, companyId: string, prefix: string): number {
  return userIdBytes(companyId + '\u0000' + externalIdOf(kind, 0), prefix + '000000000000')
}

function collect(): void {
  const gc = (globalThis as { gc?: () => void }).gc
  if (!gc) throw new Error('run with node --expose-gc')
  for (let i = 0; i < 3; i++) gc()
}

/** A fresh flat string, as pg's row parser or JSON.parse of a token produce one. */
function fresh(s: string): string {
  return /^[\u0000-\u00ff]*$/.test(s) ? Buffer.from(s, 'latin1').toString('latin1') : Buffer.from(s, 'utf16le').toString('utf16le')
}

/**
 * `sharedId` simulates the change proposed in RESULTS.md (states.ts keeps the lookup key as
 * the cached user's id instead of the row's own copy of the same 36 characters).
 */
export async function measureStatesMemory(users: number, cacheSize = users, sharedId = false, externalIds: ExternalIds = 'short', userIds = false, maxBytes = DEFAULT_MAX_BYTES): Promise<MemoryResult> {
  const h = randomBytes(12).toString('hex')
  const prefix = `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-`
  const companyId = '6f1b3c2a-8d4e-4f5a-9b6c-7d8e9f0a1b2c'
  const agentId = '0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d'
  const now = new Date()
  // what store.getUsers returns: fresh row objects with fresh strings, as the pg driver makes them
  const row = (id: string): UserRecord => ({
      id: sharedId ? id : fresh(id),
      companyId: fresh(companyId),
      externalId: fresh(externalIdOf(externalIds, parseInt(id.slice(24), 16))),
      agentId: fresh(agentId),
      tokenVersion: 0,
      active: true,
      revision: 0,
      createdAt: now,
      updatedAt: now,
    })
  const store = { getUsers: async (ids: string[]) => ids.map(row), revokedJtis: async () => [] } as unknown as Store

  collect()
  const before = process.memoryUsage().heapUsed
  const states = createStates(store, createMemoryBus(), cacheSize, { maxBytes })
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
  const estimatedBytesPerUser = states.bytes().users / cached
  let userIdsResult: MemoryResult['userIds']
  if (userIds) {
    // as token issuance remembers them: the request's external id, the user id read from the store
    for (let i = 0; i < users; i++) states.rememberUserId(fresh(companyId), fresh(externalIdOf(externalIds, i)), fresh(prefix + i.toString(16).padStart(12, '0')))
    collect()
    const held = states.bytes().userIds
    const entries = Math.round(held / (userIdBytesOf(externalIds, companyId, prefix) || 1))
    userIdsResult = { entries, heapBytesPerEntry: (process.memoryUsage().heapUsed - full.heapUsed) / entries, estimatedBytesPerEntry: held / entries }
  }
  states.close()
  return {
    externalIds,
    maxBytes,
    estimatedBytesPerUser,
    ...(userIdsResult ? { userIds: userIdsResult } : {}),
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
 * Memory (heap and array buffers) held for revoked tokens once `revoked` jtis were added,
 * each a fresh UUID string (as JSON.parse of a bus message makes it) with an exp a day
 * ahead: the filter's fixed size plus the bounded set of confirmed jtis, whatever `revoked` is.
 */
export async function measureRevokedTokens(revoked: number, filterBytes = 16 * 2 ** 20): Promise<RevokedMemory> {
  const h = randomBytes(12).toString('hex')
  const prefix = `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-`
  const exp = Math.floor(Date.now() / 1000) + 86400
  collect()
  const held = () => process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers
  const before = held()
  const set = createRevokedTokens({ loadPage: async () => [], read: async () => false, trusted: () => true, filterBytes, rebuildAfterAdds: Number.POSITIVE_INFINITY })
  await new Promise((resolve) => setImmediate(resolve)) // the (empty) load lands
  const started = process.hrtime.bigint()
  for (let i = 0; i < revoked; i++) set.add({ jti: fresh(prefix + i.toString(16).padStart(12, '0')), exp: exp + (i % 3600) })
  const fillSeconds = Number(process.hrtime.bigint() - started) / 1e9
  collect()
  const delta = held() - before
  // a jti added is a "maybe": the filter sends it to the store
  if (set.stats().entries !== revoked || !(set.isRevoked(prefix + '000000000000') instanceof Promise)) throw new Error('the revoked filter does not hold what was added')
  set.close()
  return { revoked, mb: delta / 2 ** 20, bytesPerJti: delta / revoked, fillSeconds }
}

const EXTERNAL_IDS = ['short', 'ascii255', 'cjk255'] as const

export default defineScenario({
  name: 'memory',
  description: 'heap per cached user (≤ 200 B), per revoked jti and of the verifier cache, in process (with --expose-gc)',
  options: {
    memoryUsers: number('users cached', { default: 1_000_000, smoke: 5000 }),
    memoryRevoked: number('revoked jtis added to the filter', { default: 1_000_000, smoke: 5000 }),
    memoryCacheSize: number("the users cache's entries (default: --memory-users)"),
    maxBytes: number('CACHE_MAX_BYTES', { default: DEFAULT_MAX_BYTES }),
    externalId: choice("every user's external id: user-<12 hex>, or 255 ASCII or CJK characters", EXTERNAL_IDS, 'short'),
    userIds: flag('also fill the (company, external id) → user id index, as token issuance does'),
    sharedId: flag("simulate keeping the lookup key as the cached user's id (RESULTS.md)"),
  },
  smoke: true,
  exposeGc: true,
  async run(ctx) {
    const { memoryUsers: users, memoryRevoked, externalId, userIds, sharedId, maxBytes } = ctx.opts
    ctx.log(`measuring heap per cached user (${users.toLocaleString('en-US')} users in src/cache/states.ts)`)
    const m = await measureStatesMemory(users, ctx.opts.memoryCacheSize ?? users, sharedId, externalId, userIds, maxBytes)
    m.verifierCache = measureVerifierCache(Math.min(users, 100_000))
    m.revokedTokens = await measureRevokedTokens(memoryRevoked)
    const v = m.verifierCache
    const r = m.revokedTokens
    return {
      scenario: 'memory',
      title: `memory: ${m.cached.toLocaleString('en-US')} of ${m.users.toLocaleString('en-US')} users cached, in process`,
      about: [`${m.externalIds} external ids, CACHE_MAX_BYTES ${m.maxBytes}${sharedId ? ', --shared-id' : ''}`],
      lines: [
        `heap ${m.heapUsedMb.toFixed(0)} MB, RSS ${m.rssMb.toFixed(0)} MB, filled in ${m.fillSeconds.toFixed(1)} s; the cache's own estimate ${m.estimatedBytesPerUser.toFixed(0)} B per user (src/cache/sizes.ts)`,
        ...(m.userIds ? [`external-id index: ${m.userIds.entries.toLocaleString('en-US')} entries, ${m.userIds.heapBytesPerEntry.toFixed(0)} B heap per entry (estimated ${m.userIds.estimatedBytesPerEntry.toFixed(0)} B)`] : []),
        `JWT verifier cache with ${v.tokens.toLocaleString('en-US')} tokens: ${v.mb.toFixed(0)} MB (${v.bytesPerToken.toFixed(0)} B/token)`,
        `${r.revoked.toLocaleString('en-US')} revoked jtis: ${r.mb.toFixed(1)} MB (the filter and the confirmed jtis, whatever the count; added in ${r.fillSeconds.toFixed(2)} s)`,
      ],
      checks: [
        {
          text: `heap per cached user ≤ 200 B: ${m.heapBytesPerUser.toFixed(0)} B (${m.cached.toLocaleString('en-US')} users in src/cache/states.ts; entries alone ${m.entryBytesPerUser.toFixed(0)} B, empty caches ${m.emptyCachesMb.toFixed(1)} MB)`,
          ok: m.heapBytesPerUser <= 200,
        },
      ],
      data: m,
    }
  },
})
