import type { TokenClaims } from '../auth/verify.js'
import { AGENT_GENERATION_CLAIM, COMPANY_GENERATION_CLAIM } from '../domain.js'

/** Why a session ended: a §3.3 denial's `{code, message}`, or NODE_CLOSING / SERVICE_UNAVAILABLE. */
export interface EndReason {
  code: string
  message: string
}

/**
 * The sessions of one row (a user, a company, an agent, or one jti), under its id. A session
 * points at its buckets rather than holding the ids itself: the many sessions of a company or
 * an agent share one copy of its id, and closing one finds its sets without a lookup.
 */
export interface Bucket {
  readonly id: string
  /**
   * Its sessions: most users and most jtis have one, held as itself (a Set of one costs
   * more than the rest of the session); a Set from the second on.
   */
  members: Session | Set<Session> | undefined
}

/**
 * One open session: only what a re-check needs of its token (SPEC §8.1 asks ≤ 1 KiB each).
 * A class, so that every session has the same small shape. (Node's AbortSignal alone is
 * ~730 bytes: the rest is kept to a few hundred.)
 */
export class Session {
  /** its place in the expiry heap (expiry.ts); -1 once it left it */
  heapIndex = -1
  open = true
  readonly controller = new AbortController()

  constructor(
    readonly user: Bucket,
    readonly company: Bucket,
    readonly agent: Bucket,
    readonly jti: Bucket | undefined,
    readonly tokenVersion: number,
    readonly companyGeneration: number,
    readonly agentGeneration: number,
    /** exp + JWT_CLOCK_TOLERANCE, in milliseconds: the instant verify starts answering TOKEN_EXPIRED */
    readonly expiresAtMs: number,
  ) {}
}

/** The claims a session keeps, read once from an accepted token's verified claims. */
export function sessionFacts(claims: TokenClaims) {
  return {
    tokenVersion: claims.tokenVersion,
    companyGeneration: claims[COMPANY_GENERATION_CLAIM] ?? 0,
    agentGeneration: claims[AGENT_GENERATION_CLAIM] ?? 0,
  }
}
