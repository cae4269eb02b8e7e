import { randomUUID } from 'node:crypto'
import { parseDuration } from '../config.js'
import { errors } from '../errors.js'
import type { Gateway } from '../gateway.js'
import { isUuid, type AgentState, type UserState } from '../store/store.js'

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

/** SPEC §3.1 step 3, explicit agent: one of the key's company, active or not. */
export async function agentOfCompany(gateway: Gateway, companyId: string, agentId: string): Promise<AgentState> {
  const agent = isUuid(agentId) ? await gateway.states.agent(agentId) : undefined
  if (agent === undefined || agent.companyId !== companyId) throw errors.agentNotFound()
  return agent
}

/**
 * SPEC §3.1 step 4: one customer user per (company, userId), however many first requests
 * race (the unique constraint decides); an explicit agent ties the user to it; an
 * inactive user gets no token and no change.
 */
export async function findOrCreateUser(gateway: Gateway, companyId: string, externalId: string, agent: AgentState | undefined): Promise<UserState> {
  const { states, store } = gateway
  let user = await existingUser(gateway, companyId, externalId)
  if (user === undefined) {
    const created = await store.createUserIfAbsent(companyId, externalId, agent?.id ?? null)
    if (created !== undefined) {
      states.rememberUserId(companyId, externalId, created.id)
      return created
    }
    user = await store.getUserByExternalId(companyId, externalId)
    if (user === undefined) throw errors.defaultAgentRequired()
    states.rememberUserId(companyId, externalId, user.id)
  }
  if (!user.active) throw errors.customerUserInactive()
  if (agent !== undefined && user.agentId !== agent.id) {
    const retied = await store.setUserAgent(user.id, agent.id)
    if (retied === undefined) throw errors.customerUserInactive()
    await gateway.announce({ kind: 'user', state: retied }, retied.outboxId)
    return retied
  }
  return user
}

async function existingUser(gateway: Gateway, companyId: string, externalId: string): Promise<UserState | undefined> {
  const knownId = gateway.states.knownUserId(companyId, externalId)
  if (knownId !== undefined) return gateway.states.user(knownId)
  const user = await gateway.store.getUserByExternalId(companyId, externalId)
  if (user !== undefined) gateway.states.rememberUserId(companyId, externalId, user.id)
  return user
}

/** Signs the JWT of SPEC §3.1 for the user's current token_version. */
export function signToken(gateway: Gateway, user: UserState, agent: AgentState, lifetimeSeconds: number): { token: string; exp: number } {
  const iat = Math.floor(Date.now() / 1000)
  const exp = iat + lifetimeSeconds
  const { issuer, audience } = gateway.config.jwt
  const token = gateway.keyring.sign({
    sub: user.id,
    tokenVersion: user.tokenVersion,
    companyId: user.companyId,
    agentId: agent.id,
    iat,
    exp,
    jti: randomUUID(),
    ...(issuer !== undefined ? { iss: issuer } : {}),
    ...(audience !== undefined ? { aud: audience } : {}),
  })
  return { token, exp }
}

function formatSeconds(seconds: number): string {
  if (seconds % 86400 === 0) return `${seconds / 86400}d`
  if (seconds % 3600 === 0) return `${seconds / 3600}h`
  return `${Math.floor(seconds / 60)}m`
}
