import { errors } from '../errors.js'
import { isCanonicalUuid, type Actor } from '../domain.js'
import type { Receipt } from '../bus/bus.js'
import type { Changes } from '../changes.js'
import { claimedKid, type Keyring } from '../jwt/keyring.js'

/** SPEC §7.1 `revoke-token`: the one token (its jti) refused until its exp, on every node. */
export interface TokenRevoker {
  /**
   * Resolves once every node refuses the token. 400 unless it carries our valid signature
   * and the key's company. Whether the token is past keeping is the store's decision, by
   * the database's clock (store/token-revocations.ts), never this node's: a node whose
   * clock leads would otherwise answer 200 and write nothing for a token other nodes still
   * accept. A token whose `kid` this node does not know may be valid on a node that does (a
   * key rotation under way): 400 `TOKEN_KEY_UNKNOWN` says so, and nothing is written, since
   * a signature this node cannot check proves neither the token nor its company.
   * 409 `REVOCATION_LIMIT` when the company already holds `maxLiveRevocations` live
   * revocations and this token is not one of them: nothing is written.
   */
  revoke(key: { companyId: string; keyId: string }, token: string): Promise<{ jti: string; exp: number }>
  /**
   * SPEC §10.2: the same for the admin API: a token of any company, as long as it carries our
   * valid signature (its own company's limit applies). `receipt` null: the token was already
   * revoked or has expired.
   */
  revokeAnyCompany(token: string, actor: Actor): Promise<{ jti: string; exp: number; receipt: Receipt | null }>
}

export interface TokenRevokerOptions {
  keyring: Pick<Keyring, 'verify' | 'kids'>
  changes: Pick<Changes, 'revokeToken'>
  /**
   * How long past exp a revocation is still needed (JWT_CLOCK_TOLERANCE + MAX_CLOCK_SKEW:
   * a node within the bound accepts the token until then, by its own clock).
   */
  graceSeconds: number
  /** live single-token revocations one company may hold (MAX_LIVE_TOKEN_REVOCATIONS) */
  maxLiveRevocations: number
}

/** A jti we signed is a UUID; anything longer is not ours to store. */
const MAX_JTI_LENGTH = 128
/** 9999-12-31T23:59:59Z: our tokens expire long before; past it a date cannot be stored. */
const MAX_EXP_SECONDS = 253_402_300_799

export function createTokenRevoker({ keyring, changes, graceSeconds, maxLiveRevocations }: TokenRevokerOptions): TokenRevoker {
  /** Revokes the token if it is ours (of `companyId` when given): its jti and exp, and the receipt (null: nothing new to refuse). */
  async function revoke(token: string, companyId: string | undefined, actor: Actor): Promise<{ jti: string; exp: number; receipt: Receipt | null }> {
    const claims = token.length > 0 ? keyring.verify(token) : undefined
    if (claims === undefined) {
      const kid = claimedKid(token)
      if (kid !== undefined && !keyring.kids.includes(kid)) throw errors.tokenKeyUnknown()
    }
    const { jti, exp, sub } = claims ?? {}
    if (
      claims === undefined ||
      typeof claims.companyId !== 'string' ||
      !isCanonicalUuid(claims.companyId) ||
      (companyId !== undefined && claims.companyId !== companyId) ||
      typeof jti !== 'string' ||
      typeof sub !== 'string' ||
      jti.length === 0 ||
      jti.length > MAX_JTI_LENGTH ||
      !Number.isSafeInteger(exp) ||
      (exp as number) > MAX_EXP_SECONDS
    ) {
      throw errors.tokenNotFound()
    }
    const expiry = exp as number
    const revoked = await changes.revokeToken(claims.companyId, jti, expiry, sub, { maxLive: maxLiveRevocations, graceSeconds }, actor)
    if (revoked === 'limit-reached') throw errors.revocationLimit(maxLiveRevocations)
    // Expired past the grace by the store's clock: refused at check 2 on every node within
    // MAX_CLOCK_SKEW; nothing written (SPEC: an expired token answers 200 again).
    if (revoked === 'expired') return { jti, exp: expiry, receipt: null }
    // The company exists (the key belongs to it, or it signed the token); no row would mean it just vanished.
    if (revoked === undefined) throw errors.tokenNotFound()
    return { jti, exp: expiry, receipt: revoked.record.first ? revoked.receipt : null }
  }

  return {
    async revoke({ companyId, keyId }, token) {
      const { jti, exp } = await revoke(token, companyId, { kind: 'apiKey', keyId })
      return { jti, exp }
    },
    revokeAnyCompany: (token, actor) => revoke(token, undefined, actor),
  }
}
