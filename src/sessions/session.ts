import { identityBody, type IdentityBody } from '../auth/identity-body.js'
import type { VerifiedClaims } from '../auth/verify.js'
import { AGENT_GENERATION_CLAIM, COMPANY_GENERATION_CLAIM } from '../domain.js'
import type { Cohort } from './cohort.js'
import { jtiOf, jtiWords } from './jti.js'

/** Why a session ended: a §3.3 denial's `{code, message}`, or NODE_CLOSING / SERVICE_UNAVAILABLE. */
export interface EndReason {
  code: string
  message: string
}

/** What ends a session: its registry's (sessions.ts), shared by all its sessions. */
export interface SessionOwner {
  end(session: Session, why: EndReason | undefined): void
}

/** `heapIndex` of a session that is not (or no longer) in the expiry heap */
export const NOT_IN_HEAP = -1

/**
 * One open session, as `Sessions.open` gives it and `openChatSession` hands it to the chat
 * server: `{ ok, identity, signal, close }`, `identity` being the verify endpoint's 200 body.
 *
 * SPEC §8.1 asks ≤ 1 KiB each, and Node's AbortSignal alone is 728 bytes (an EventTarget
 * with two Maps; `node --expose-gc dist/bench/sessions.js`, bench/RESULTS.md). So a session
 * is one object of one shape, and every field counts (8 bytes each): it is its own
 * AbortController (its `signal`, which Node makes when first read, is aborted with the
 * `EndReason` the moment the token stops being valid) and the handle the caller keeps (no
 * wrapper); it keeps only what a re-check needs of its token and what its identity is made
 * of (strings shared with the cached rows), and what it shares with the other sessions of
 * its agent once for them all (cohort.ts); `identity` and `close` are made when asked for;
 * its registry is on its class's prototype (a subclass per registry, sessions.ts), and it is
 * open exactly while it is in the expiry heap (every open session is), so neither takes a
 * field.
 */
export abstract class Session extends AbortController {
  /** its place in the expiry heap (expiry.ts); NOT_IN_HEAP before it opened and once it ended */
  heapIndex = NOT_IN_HEAP
  /** its neighbours in its cohort's list (cohort.ts) */
  prev: Session | undefined = undefined
  next: Session | undefined = undefined

  /** its token's jti, in four words (jti.ts); the first is the jti index's key */
  readonly jtiKey: number | string | undefined
  private readonly jti1: number
  private readonly jti2: number
  private readonly jti3: number

  constructor(
    /** what it shares with the other sessions of its agent: company, agent, agent name, generations (cohort.ts) */
    readonly cohort: Cohort,
    readonly userId: string,
    private readonly externalId: string,
    jti: string | undefined,
    readonly tokenVersion: number,
    /** the token's exp, in seconds (a small integer: a whole field, where milliseconds would be boxed) */
    readonly exp: number,
  ) {
    super()
    ;[this.jtiKey, this.jti1, this.jti2, this.jti3] = jtiWords(jti)
  }

  /** its token's jti (a new string at each read) */
  get jti(): string | undefined {
    return jtiOf(this.jtiKey, this.jti1, this.jti2, this.jti3)
  }

  get companyId(): string {
    return this.cohort.companyId
  }

  get agentId(): string {
    return this.cohort.agentId
  }

  get companyGeneration(): number {
    return this.cohort.companyGeneration
  }

  get agentGeneration(): number {
    return this.cohort.agentGeneration
  }

  /** the registry that ends it: a getter on the registry's subclass, not a field */
  protected abstract get owner(): SessionOwner

  get ok(): true {
    return true
  }

  /** still watched: it ended (aborted or closed) once it left the expiry heap */
  get open(): boolean {
    return this.heapIndex !== NOT_IN_HEAP
  }

  /** the verify endpoint's 200 body, as verified when the session opened (a new object at each read: keep it if you need it often) */
  get identity(): IdentityBody {
    return identityBody({
      user: { id: this.userId, externalId: this.externalId, companyId: this.companyId, agentId: this.agentId },
      // it was active: the session was accepted; once it is not, the session has ended
      agent: { id: this.agentId, name: this.cohort.agentName, active: true },
      tokenVersion: this.tokenVersion,
      exp: this.exp,
    })
  }

  /** stops watching the token (the signal is not aborted); a function of its own, so that it can be passed around */
  get close(): () => void {
    return () => this.owner.end(this, undefined)
  }
}

/** The claims a session keeps, read once from an accepted token's verified claims. */
export function sessionFacts(claims: VerifiedClaims) {
  return {
    tokenVersion: claims.tokenVersion,
    companyGeneration: claims[COMPANY_GENERATION_CLAIM] ?? 0,
    agentGeneration: claims[AGENT_GENERATION_CLAIM] ?? 0,
  }
}
