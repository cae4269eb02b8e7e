import { Type } from '@sinclair/typebox'
import type { Receipt as BusReceipt } from '../../bus/bus.js'
import type { AgentRecord, ApiKeyRecord, CompanyRecord, UserRecord } from '../../store/store.js'

/** SPEC §10.2: where a change arrived, as the node that made it saw it (bus/bus.ts, `Receipt`). */
export const Receipt = Type.Object(
  {
    changeId: Type.String(),
    outcome: Type.Union([Type.Literal('acknowledged'), Type.Literal('lease_expired'), Type.Literal('embedded')], {
      description: 'acknowledged: every node acknowledged; lease_expired: the writer waited out the lease of a node that did not; embedded: the single node of the embedded store',
    }),
    nodes: Type.Array(
      Type.Object({
        nodeId: Type.String(),
        ackedAfterMs: Type.Union([Type.Number(), Type.Null()], { description: 'ms from the commit to its acknowledgement; null: it did not acknowledge, and refuses the change\'s tokens once its lease lapsed' }),
        sessionsEnded: Type.Union([Type.Integer(), Type.Null()], { description: 'open sessions (SPEC §8.1) the change ended there; null: not known' }),
      }),
      { description: 'every node registered when the change went out' },
    ),
  },
  { description: 'where the change arrived (SPEC §10.2)' },
)

/** A receipt as answered: the bus's own, field by field (the response schema drops anything else). */
export const receiptBody = (receipt: BusReceipt) => ({
  changeId: receipt.changeId,
  outcome: receipt.outcome,
  nodes: receipt.nodes.map((node) => ({ nodeId: node.nodeId, ackedAfterMs: node.ackedAfterMs, sessionsEnded: node.sessionsEnded })),
})

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
