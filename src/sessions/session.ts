import type { Identity, TokenClaims } from '../auth/verify.js'
import { AGENT_GENERATION_CLAIM, COMPANY_GENERATION_CLAIM } from '../domain.js'

/** Why a session ended: a §3.3 denial's `{code, message}`, or NODE_CLOSING / SERVICE_UNAVAILABLE. */
export interface EndReason {
  code: string
  message: string
}

/** What ends a session: its registry's (sessions.ts), shared by all its sessions. */
export interface SessionOwner {
  end(session: Session, why: EndReason | undefined): void
}

/**
 * One open session, as `Sessions.open` gives it: `{ ok, identity, signal, close }`
 * (`openChatSession` hands out a small handle over it, with the verify endpoint's identity).
 *
 * SPEC §8.1 asks ≤ 1 KiB each, and Node's AbortSignal alone is 728 bytes (an EventTarget
 * with two Maps; `node --expose-gc dist/bench/sessions.js`, bench/RESULTS.md). So a session keeps only
 * what a re-check needs of its token and what its identity is made of (strings shared with
 * the cached rows), in one object of one shape: it is its own AbortController (its `signal`,
 * which Node makes when first read, is aborted with the `EndReason` the moment the token
 * stops being valid), and `identity` and `close` are made when asked for.
 */
export class Session extends AbortController {
  /** its place in the expiry heap (expiry.ts); -1 once it left it */
  heapIndex = -1
  open = true

  constructor(
    private readonly owner: SessionOwner,
    readonly userId: string,
    readonly companyId: string,
    readonly agentId: string,
    readonly jti: string | undefined,
    readonly tokenVersion: number,
    readonly companyGeneration: number,
    readonly agentGeneration: number,
    /** the token's exp, in seconds (a small integer: a whole field, where milliseconds would be boxed) */
    readonly exp: number,
    private readonly externalId: string,
    private readonly agentName: string,
  ) {
    super()
  }

  get ok(): true {
    return true
  }

  /** who the token is, as verified when the session opened (a new object at each read) */
  get identity(): Identity {
    return {
      user: { id: this.userId, externalId: this.externalId, companyId: this.companyId, agentId: this.agentId },
      // it was active: the session was accepted; once it is not, the session has ended
      agent: { id: this.agentId, name: this.agentName, active: true },
      tokenVersion: this.tokenVersion,
      exp: this.exp,
    }
  }

  /** stops watching the token (the signal is not aborted); a function of its own, so that it can be passed around */
  get close(): () => void {
    return () => this.owner.end(this, undefined)
  }
}

/** The claims a session keeps, read once from an accepted token's verified claims. */
export function sessionFacts(claims: TokenClaims) {
  return {
    tokenVersion: claims.tokenVersion,
    companyGeneration: claims[COMPANY_GENERATION_CLAIM] ?? 0,
    agentGeneration: claims[AGENT_GENERATION_CLAIM] ?? 0,
  }
}
