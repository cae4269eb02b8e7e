/**
 * The answers of the admin calls SPEC §10.2 adds, as the console reads them.
 */
import type { Company, CustomerUser } from '../../src/client/index.js'
import type { Receipt } from './receipt.js'

export interface NodeView {
  nodeId: string
  version: string | null
  startedAt: string | null
  ready: boolean
  trusted: boolean
  untrustedSince: string | null
  lastChangeAt: string | null
  changeLogReadAt: string | null
  behind: { changes: number; ms: number }
  cache: { users: number; bytes: number }
  sessions: number
  eventStreams: number
  clockOffsetMs: number | null
  redis: { follows: string | null; subscribed: boolean } | null
}

export interface Operator {
  id: string
  name: string
  role: 'viewer' | 'operator' | 'admin'
  createdAt: string
  revokedAt: string | null
  lastUsedAt: string | null
}

export interface CompaniesPage {
  companies: Company[]
  next: string | null
}

export interface Preview {
  users: number
  openSessions: number
}

export type UserWithReceipt = CustomerUser & { receipt: Receipt }
