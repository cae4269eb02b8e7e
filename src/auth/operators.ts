import { randomBytes } from 'node:crypto'
import { ADMIN_CALLER, type Caller } from '../domain.js'
import type { LiveOperator, Store } from '../store/store.js'
import { hashSecret } from './api-keys.js'

/** `opt_` + 32 random bytes in base64url (SPEC §10.1): what an operator's token looks like. */
const OPERATOR_TOKEN = /^opt_[A-Za-z0-9_-]{43}$/

/** A new operator token, shown once, and the hash that is kept. */
export function generateOperatorToken(): { token: string; tokenHash: Buffer } {
  const token = 'opt_' + randomBytes(32).toString('base64url')
  return { token, tokenHash: hashSecret(token) }
}

/** The caller an operator's row makes. */
export const operatorCaller = (operator: LiveOperator): Caller => ({ role: operator.role, actor: { kind: 'operator', id: operator.id, name: operator.name } })

/**
 * SPEC §10.1: who a bearer token of the admin API names: ADMIN_TOKEN (role admin), or a live
 * operator, looked up in the store on every call (no cache: a revocation is seen on every
 * node from its commit on). undefined: neither.
 */
export type AdminCallerOf = (token: string) => Promise<Caller | undefined>

export interface AdminCallerOptions {
  store: Pick<Store, 'liveOperatorByTokenHash' | 'markOperatorUsed'>
  adminTokenMatches(presented: string): boolean
  /** the `lastUsedAt` write failed (it is bookkeeping: the call goes on) */
  onUseNotRecorded(error: unknown): void
  now?: () => number
}

/** `lastUsedAt` is written at most this often per operator by one node (and by the store's own check, by all). */
const USE_RECORDED_EVERY_MS = 60_000

export function createAdminCallers({ store, adminTokenMatches, onUseNotRecorded, now = Date.now }: AdminCallerOptions): { callerOf: AdminCallerOf; noteUsed(operatorId: string): void } {
  const recordedAt = new Map<string, number>()

  function noteUsed(operatorId: string): void {
    const at = now()
    if (at - (recordedAt.get(operatorId) ?? -Infinity) < USE_RECORDED_EVERY_MS) return
    recordedAt.set(operatorId, at)
    // Operators are few: the map stays small; an entry older than the interval says nothing.
    if (recordedAt.size > 10_000) for (const [id, when] of recordedAt) if (at - when >= USE_RECORDED_EVERY_MS) recordedAt.delete(id)
    store.markOperatorUsed(operatorId).catch(onUseNotRecorded)
  }

  return {
    noteUsed,
    async callerOf(token) {
      if (adminTokenMatches(token)) return ADMIN_CALLER
      // Anything not shaped like an operator token is refused without a store read.
      if (!OPERATOR_TOKEN.test(token)) return undefined
      const operator = await store.liveOperatorByTokenHash(hashSecret(token))
      if (operator === undefined) return undefined
      noteUsed(operator.id)
      return operatorCaller(operator)
    },
  }
}
