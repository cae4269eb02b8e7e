import { Type, type TSchema } from '@sinclair/typebox'

/** SPEC §3: every error body. */
export const ErrorBody = Type.Object({
  statusCode: Type.Integer(),
  message: Type.String(),
  code: Type.String(),
})

/** Documents and serialises the error statuses a route can answer. */
export function errorResponses(...statuses: number[]): Record<number, TSchema> {
  return Object.fromEntries(statuses.map((status) => [status, ErrorBody]))
}

export const UserBody = Type.Object({
  id: Type.String(),
  externalId: Type.String(),
  companyId: Type.String(),
  agentId: Type.String(),
})

export const AgentSummary = Type.Object({
  id: Type.String(),
  name: Type.String(),
  active: Type.Boolean(),
})

/**
 * Bounded strings: an empty or oversized value is a 400 before any work is done, and so
 * is a NUL character, which PostgreSQL cannot store in text.
 */
export const Text = (maxLength: number, minLength = 1) => Type.String({ minLength, maxLength, pattern: '^[^\\u0000]*$' })
