/**
 * The shape of the answers a caller acts on. A verify that resolves is an "allow": it must
 * come from the gateway's own 200 with the identity the API reference gives, never from
 * whatever JSON a proxy or a stranger sent (`null`, `{}`, a page of something else).
 */
import type { Verified } from './types.js'

type Fields = Record<string, unknown>

const isRecord = (value: unknown): value is Fields => typeof value === 'object' && value !== null && !Array.isArray(value)
const strings = (record: Fields, names: string[]) => names.every((name) => typeof record[name] === 'string')

/** `{ user: {id, externalId, companyId, agentId}, agent: {id, name, active}, tokenVersion, expiresAt }` */
export function isVerified(body: unknown): body is Verified {
  if (!isRecord(body) || !isRecord(body.user) || !isRecord(body.agent)) return false
  return (
    strings(body.user, ['id', 'externalId', 'companyId', 'agentId']) &&
    strings(body.agent, ['id', 'name']) &&
    typeof body.agent.active === 'boolean' &&
    Number.isInteger(body.tokenVersion) &&
    typeof body.expiresAt === 'string'
  )
}
