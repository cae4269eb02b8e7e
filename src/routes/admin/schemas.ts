import { Type } from '@sinclair/typebox'
import type { AgentRecord, ApiKeyRecord, CompanyRecord, UserRecord } from '../../store/store.js'

export const Company = Type.Object({
  id: Type.String(),
  name: Type.String(),
  defaultAgentId: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
})
/** SPEC §7.3: a company's counts against its limits (the configured values beside them). */
export const CompanyUsage = Type.Object({
  companyId: Type.String(),
  users: Type.Integer(),
  maxUsers: Type.Integer(),
  newUsersAvailable: Type.Integer(),
  newUsersBurst: Type.Integer(),
  newUsersPerMinute: Type.Integer(),
  liveTokenRevocations: Type.Integer(),
  maxLiveTokenRevocations: Type.Integer(),
})
export const Agent = Type.Object({
  id: Type.String(),
  companyId: Type.String(),
  name: Type.String(),
  active: Type.Boolean(),
  createdAt: Type.String(),
})
export const ApiKeyListItem = Type.Object({
  keyId: Type.String(),
  name: Type.Union([Type.String(), Type.Null()]),
  createdAt: Type.String(),
  revokedAt: Type.Union([Type.String(), Type.Null()]),
  lastUsedAt: Type.Union([Type.String(), Type.Null()]),
})
export const CustomerUser = Type.Object({
  id: Type.String(),
  externalId: Type.String(),
  companyId: Type.String(),
  agentId: Type.String(),
  tokenVersion: Type.Integer(),
  active: Type.Boolean(),
  createdAt: Type.String(),
})

const iso = (date: Date | null) => (date === null ? null : date.toISOString())

export const companyBody = (c: CompanyRecord) => ({ id: c.id, name: c.name, defaultAgentId: c.defaultAgentId, createdAt: c.createdAt.toISOString() })
export const agentBody = (a: AgentRecord) => ({ id: a.id, companyId: a.companyId, name: a.name, active: a.active, createdAt: a.createdAt.toISOString() })
export const apiKeyListBody = (k: ApiKeyRecord) => ({
  keyId: k.keyId,
  name: k.name,
  createdAt: k.createdAt.toISOString(),
  revokedAt: iso(k.revokedAt),
  lastUsedAt: iso(k.lastUsedAt),
})
export const customerUserBody = (u: UserRecord) => ({
  id: u.id,
  externalId: u.externalId,
  companyId: u.companyId,
  agentId: u.agentId,
  tokenVersion: u.tokenVersion,
  active: u.active,
  createdAt: u.createdAt.toISOString(),
})
