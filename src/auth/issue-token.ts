import { randomUUID } from 'node:crypto'
import { parseDuration, type Config } from '../config.js'
import { errors } from '../errors.js'
import { AGENT_GENERATION_CLAIM, canonicalUuid, COMPANY_GENERATION_CLAIM, type AgentState, type UserState } from '../domain.js'
import type { States } from '../cache/states.js'
import { andThen, type MaybePromise } from '../maybe-promise.js'
import type { Changes } from '../changes.js'
import type { Keyring } from '../jwt/keyring.js'
import type { NewUserLimits, Store } from '../store/store.js'

const DEFAULT_LIFETIME_SECONDS = 24 * 3600

/**
 * SPEC §3.1 step 2: `<positive integer><m|h|d>`, at most the configured maximum. Without
 * `expiresIn`, 24 h — or the maximum, when an operator configured one below a day.
 */
export function tokenLifetime(expiresIn: string | undefined, maxSeconds: number): number {
  if (expiresIn === undefined) return Math.min(DEFAULT_LIFETIME_SECONDS, maxSeconds)
  const seconds = parseDuration(expiresIn)
  if (seconds === undefined) {
    throw errors.invalidExpiresIn('expiresIn must be a positive integer followed by m, h or d (for example 30m, 1h, 7d)')
  }
  if (seconds > maxSeconds) throw errors.invalidExpiresIn(`expiresIn exceeds the maximum token lifetime of ${formatSeconds(maxSeconds)}`)
  return seconds
}

export interface TokenIssuerOptions {
  states: Pick<States, 'user' | 'agent' | 'company' | 'knownUserId' | 'rememberUserId'>
  store: Pick<Store, 'createUser' | 'getUserByExternalId'>
  changes: Pick<Changes, 'setUserAgent'>
  keyring: Pick<Keyring, 'sign'>
  jwt: Pick<Config['jwt'], 'issuer' | 'audience'>
  maxLifetimeSeconds: number
  /** SPEC §7.3: the new users one company may create and hold */
  newUsers: NewUserLimits
  /** told of each user created and each one refused by a limit (metrics, the operator's log) */
  onNewUser?: (outcome: NewUserOutcome, companyId: string) => void
}

export type NewUserOutcome = 'created' | 'rate-limit' | 'user-limit'

/**
 * The steps of SPEC §3.1 after the API key is authenticated, over the node's caches and
 * store. Each answers with a value when the caches held all it needed, else with a promise
 * (`await` either): a token for a cached user makes no promise (the route, routes/token.ts).
 */
export interface TokenIssuer {
  /** SPEC §3.1 step 2 (see tokenLifetime) with the configured maximum. */
  lifetime(expiresIn: string | undefined): number
  /** SPEC §3.1 step 3, explicit agent: one of the key's company, active or not. */
  agentOfCompany(companyId: string, agentId: string): MaybePromise<AgentState>
  /**
   * SPEC §3.1 step 4: one customer user per (company, userId), however many first requests
   * race (the unique constraint decides); an explicit agent ties the user to it; an
   * inactive user gets no token and no change. A new user only within the company's limits
   * (SPEC §7.3: 429 `NEW_USER_RATE_LIMITED`, 409 `USER_LIMIT`); an existing one never pays
   * for them (found in the cache, or by one read, before any creation is tried).
   */
  findOrCreateUser(companyId: string, externalId: string, agent: AgentState | undefined): MaybePromise<UserState>
  /**
   * Signs the JWT of SPEC §3.1 for the user's current token_version, and the current tokens
   * generations of its company and agent (SPEC §7.1: valid until their next revoke-tokens).
   */
  sign(user: UserState, agent: AgentState, lifetimeSeconds: number): MaybePromise<{ token: string; exp: number }>
}

export function createTokenIssuer({ states, store, changes, keyring, jwt, maxLifetimeSeconds, newUsers, onNewUser = () => {} }: TokenIssuerOptions): TokenIssuer {
  function existingUser(companyId: string, externalId: string): MaybePromise<UserState | undefined> {
    const knownId = states.knownUserId(companyId, externalId)
    if (knownId !== undefined) {
      // the cache holds a user without its id: it is the one asked for
      return andThen(states.user(knownId), (cached) =>
        cached === undefined ? undefined : { id: knownId, companyId: cached.companyId, externalId: cached.externalId, agentId: cached.agentId, tokenVersion: cached.tokenVersion, active: cached.active, revision: cached.revision },
      )
    }
    return store.getUserByExternalId(companyId, externalId).then((user) => {
      if (user !== undefined) states.rememberUserId(companyId, externalId, user.id)
      return user
    })
  }

  async function createUser(companyId: string, externalId: string, agent: AgentState | undefined): Promise<UserState> {
    const creation = await store.createUser(companyId, externalId, agent?.id ?? null, newUsers)
    switch (creation?.outcome) {
      case 'created':
        onNewUser('created', companyId)
        states.rememberUserId(companyId, externalId, creation.user.id)
        return creation.user
      // created meanwhile by another request or node
      case 'exists':
        states.rememberUserId(companyId, externalId, creation.user.id)
        return usable(creation.user, agent)
      case 'rate-limit':
        onNewUser('rate-limit', companyId)
        throw errors.newUserRateLimited(creation.retryAfterSeconds)
      case 'user-limit':
        onNewUser('user-limit', companyId)
        throw errors.userLimit(newUsers.maxUsers)
      // no agent to give it (the key's company itself cannot be gone: it has no delete)
      default:
        throw errors.defaultAgentRequired()
    }
  }

  /** An inactive user gets no token; an explicit agent ties the user to it. */
  function usable(user: UserState, agent: AgentState | undefined): MaybePromise<UserState> {
    if (!user.active) throw errors.customerUserInactive()
    if (agent !== undefined && user.agentId !== agent.id) {
      return changes.setUserAgent(user.id, agent.id).then((retied) => {
        if (retied === undefined) throw errors.customerUserInactive()
        return retied.record
      })
    }
    return user
  }

  return {
    lifetime: (expiresIn) => tokenLifetime(expiresIn, maxLifetimeSeconds),

    agentOfCompany(companyId, agentId) {
      const id = canonicalUuid(agentId)
      return andThen(id === undefined ? undefined : states.agent(id), (agent) => {
        if (agent === undefined || agent.companyId !== companyId) throw errors.agentNotFound()
        return agent
      })
    },

    findOrCreateUser: (companyId, externalId, agent) =>
      andThen(existingUser(companyId, externalId), (user) => (user === undefined ? createUser(companyId, externalId, agent) : usable(user, agent))),

    // Reads the company now, after every step before it: a revoke-tokens that answered is already in it.
    sign: (user, agent, lifetimeSeconds) => andThen(states.company(user.companyId), (company) => {
      const iat = Math.floor(Date.now() / 1000)
      const exp = iat + lifetimeSeconds
      const { issuer, audience } = jwt
      const token = keyring.sign({
        sub: user.id,
        tokenVersion: user.tokenVersion,
        companyId: user.companyId,
        agentId: agent.id,
        iat,
        exp,
        jti: randomUUID(),
        [COMPANY_GENERATION_CLAIM]: company?.tokensGeneration ?? 0,
        [AGENT_GENERATION_CLAIM]: agent.tokensGeneration,
        ...(issuer !== undefined ? { iss: issuer } : {}),
        ...(audience !== undefined ? { aud: audience } : {}),
      })
      return { token, exp }
    }),
  }
}

function formatSeconds(seconds: number): string {
  if (seconds % 86400 === 0) return `${seconds / 86400}d`
  if (seconds % 3600 === 0) return `${seconds / 3600}h`
  return `${Math.floor(seconds / 60)}m`
}
