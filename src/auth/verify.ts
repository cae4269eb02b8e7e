import { denials, type Denial } from '../errors.js'
import type { Keyring } from '../jwt/keyring.js'
import type { CachedUser, States } from '../cache/states.js'
import type { MaybePromise } from '../maybe-promise.js'
import { AGENT_GENERATION_CLAIM, COMPANY_GENERATION_CLAIM, isCanonicalUuid, type AgentState, type CompanyState } from '../domain.js'

/** Who a verified token speaks for; what the verify endpoint answers and forwards upstream. */
export interface Identity {
  user: { id: string; externalId: string; companyId: string; agentId: string }
  agent: { id: string; name: string; active: boolean }
  tokenVersion: number
  /** seconds since the epoch */
  exp: number
}

/**
 * An accepted token's verdict also carries its verified claims (the object the keyring
 * already made, no copy): what a session needs to be re-checked later (sessions/).
 */
export type Verdict = { ok: true; identity: Identity; claims: VerifiedClaims } | { ok: false; denial: Denial }

/**
 * The verdict for a token. When every state it needs is cached it is returned as a value
 * (a cache hit does no I/O and needs no promise); otherwise as a promise: `await` it.
 */
export type VerifyToken = (token: string | undefined) => MaybePromise<Verdict>

export interface VerifierOptions {
  keyring: Keyring
  states: States
  clockToleranceSeconds: number
  /** counts every outcome by its code ('OK' for an accepted token) */
  onOutcome?: (code: string) => void
  now?: () => number
}

/**
 * The checks of SPEC §3.3, in their order; the first failure decides. No HTTP here: the
 * verify endpoint and the in-process Fastify plugin both call this. A store that cannot
 * answer makes it reject with StoreUnavailableError, which callers turn into 503, never
 * into an allow.
 */
export function createTokenVerifier(options: VerifierOptions): VerifyToken {
  const { keyring, states, clockToleranceSeconds } = options
  const count = options.onOutcome ?? (() => {})
  const now = options.now ?? Date.now
  const deny = (denial: Denial): Verdict => {
    count(denial.code)
    return { ok: false, denial }
  }

  // The keyring hands back the same claims object each time it meets a token again: its
  // shape (well-formed, canonical user and agent ids) is checked once, then remembered here
  // for as long as the keyring keeps it. Every check of state still runs on every request.
  const checkedClaims = new WeakSet<object>()

  return function verifyToken(token) {
    // 0. a Bearer token is present
    if (token === undefined || token === '') return deny(denials.missingToken)

    // 1. signature valid, well-formed, algorithm allowed, known kid
    const verified = keyring.verify(token)
    const known = verified !== undefined && checkedClaims.has(verified)
    const claims = known ? (verified as unknown as VerifiedClaims) : wellFormed(verified)
    if (claims === undefined) return deny(denials.invalidToken)
    if (!known && isCanonicalUuid(claims.sub) && isCanonicalUuid(claims.agentId)) checkedClaims.add(claims)

    // 2. not expired
    if (now() / 1000 >= claims.exp + clockToleranceSeconds) return deny(denials.expired)

    const user = known || isCanonicalUuid(claims.sub) ? states.user(claims.sub) : undefined
    return user instanceof Promise ? user.then((found) => checkUser(claims, found)) : checkUser(claims, user)
  }

  function checkUser(claims: VerifiedClaims, user: CachedUser | undefined): MaybePromise<Verdict> {
    // 3. customer user exists and is active
    if (user === undefined || !user.active) return deny(denials.userNotFoundOrInactive)

    // 4. tokenVersion equals the user's token_version ...
    if (claims.tokenVersion !== user.tokenVersion) return deny(denials.revoked)

    // ... and neither the token itself (its jti), nor its company, nor its agent was revoked (SPEC §7.1)
    const revoked = claims.jti === undefined ? false : states.tokenRevoked(claims.jti)
    return revoked instanceof Promise ? revoked.then((found) => checkJti(claims, user, found)) : checkJti(claims, user, revoked)
  }

  function checkJti(claims: VerifiedClaims, user: CachedUser, revoked: boolean): MaybePromise<Verdict> {
    if (revoked) return deny(denials.revoked)
    const company = states.company(user.companyId)
    return company instanceof Promise ? company.then((found) => checkCompany(claims, user, found)) : checkCompany(claims, user, company)
  }

  function checkCompany(claims: VerifiedClaims, user: CachedUser, company: CompanyState | undefined): MaybePromise<Verdict> {
    // A generation is compared only within its own company; another company's token fails check 5.
    if (company !== undefined && user.companyId === claims.companyId && (claims[COMPANY_GENERATION_CLAIM] ?? 0) < company.tokensGeneration) {
      return deny(denials.revoked)
    }
    const agent = checkedClaims.has(claims) || isCanonicalUuid(claims.agentId) ? states.agent(claims.agentId) : undefined
    return agent instanceof Promise ? agent.then((found) => checkAgent(claims, user, found)) : checkAgent(claims, user, agent)
  }

  function checkAgent(claims: VerifiedClaims, user: CachedUser, agent: AgentState | undefined): Verdict {
    if (agent !== undefined && agent.companyId === user.companyId && (claims[AGENT_GENERATION_CLAIM] ?? 0) < agent.tokensGeneration) {
      return deny(denials.revoked)
    }

    // 5. the user's company is the token's company
    if (user.companyId !== claims.companyId) return deny(denials.companyMismatch)

    // 6. the token's agent exists, belongs to that company, and is active
    if (agent === undefined || agent.companyId !== user.companyId || !agent.active) return deny(denials.agentInactive)

    count('OK')
    return {
      ok: true,
      identity: {
        // the user was read under the token's sub: that is its id
        user: { id: claims.sub, externalId: user.externalId, companyId: user.companyId, agentId: agent.id },
        agent: { id: agent.id, name: agent.name, active: agent.active },
        tokenVersion: user.tokenVersion,
        exp: claims.exp,
      },
      claims,
    }
  }
}

/** The claims of a token that passed checks 0–2 (SPEC §3.1), of the right types. */
export interface VerifiedClaims {
  sub: string
  tokenVersion: number
  companyId: string
  agentId: string
  exp: number
  /** every token we sign has one; one without it cannot be revoked alone, but the other checks hold */
  jti?: string
  [COMPANY_GENERATION_CLAIM]?: number
  [AGENT_GENERATION_CLAIM]?: number
}

/** The last second a JavaScript date can hold: an expiry past it cannot even be written down. */
const MAX_DATE_SECONDS = 8.64e12

/** A token signed by one of our keys still needs the claims of SPEC §3.1, of the right types. */
function wellFormed(claims: Record<string, unknown> | undefined): VerifiedClaims | undefined {
  if (claims === undefined) return undefined
  const { sub, tokenVersion, companyId, agentId, exp, jti } = claims
  if (
    typeof sub !== 'string' ||
    (jti !== undefined && typeof jti !== 'string') ||
    !generation(claims[COMPANY_GENERATION_CLAIM]) ||
    !generation(claims[AGENT_GENERATION_CLAIM]) ||
    typeof companyId !== 'string' ||
    typeof agentId !== 'string' ||
    typeof exp !== 'number' ||
    !(Math.abs(exp) <= MAX_DATE_SECONDS) ||
    !Number.isSafeInteger(tokenVersion) ||
    (tokenVersion as number) < 0
  ) {
    return undefined
  }
  return claims as unknown as VerifiedClaims
}

/** A generation claim is absent (a token older than it: 0) or a non-negative integer. */
const generation = (value: unknown): boolean => value === undefined || (Number.isSafeInteger(value) && (value as number) >= 0)

/** `Authorization: Bearer <jwt>` → the jwt; anything else → undefined. */
export function bearerToken(header: string | undefined): string | undefined {
  if (header === undefined || header.length < 8) return undefined
  // what every client sends: no copy of the scheme, no trim to make
  if (header.startsWith('Bearer ') && !trimmable(header.charCodeAt(7)) && !trimmable(header.charCodeAt(header.length - 1))) return header.slice(7)
  if (header.charCodeAt(6) !== 32 || header.slice(0, 6).toLowerCase() !== 'bearer') return undefined
  const token = header.slice(7).trim()
  return token === '' ? undefined : token
}

/** What `trim()` would strip at the ends of a header value (Latin-1: ASCII whitespace and NBSP). */
const trimmable = (code: number): boolean => code <= 32 || code === 0xa0
