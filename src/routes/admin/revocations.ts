import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid } from '../../domain.js'
import { callerOf } from '../../http/admin-callers.js'
import { errorResponses } from '../../http/schemas.js'
import { Receipt, receiptBody } from './schemas.js'

const CompanyTokensRevoked = Type.Object({ companyId: Type.String(), revokedAt: Type.String(), receipt: Receipt })
const AgentTokensRevoked = Type.Object({ agentId: Type.String(), revokedAt: Type.String(), receipt: Receipt })
const Preview = Type.Object({
  users: Type.Integer({ description: 'active users whose tokens the revocation would end, as far as the store knows' }),
  openSessions: Type.Integer({ description: 'open sessions (SPEC §8.1) it would end, across the live nodes' }),
})
const CompanyParams = Type.Object({ companyId: Type.String() })
const AgentParams = Type.Object({ agentId: Type.String() })

/**
 * SPEC §7.1: every token of a company (or agent) signed before the call answers is refused
 * on every node from then on; a token signed after it is valid. No body. SPEC §10.2: what
 * such a call would end, before it is made.
 */
export const revocationRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, changes, nodes }) => {
  fastify.post(
    '/companies/:companyId/revoke-tokens',
    { schema: { params: CompanyParams, response: { 200: CompanyTokensRevoked, ...errorResponses(400, 401, 403, 404, 503) } } },
    async (request) => {
      const companyId = canonicalUuid(request.params.companyId)
      const revoked = companyId === undefined ? undefined : await changes.revokeCompanyTokens(companyId, callerOf(request).actor)
      if (revoked === undefined) throw errors.notFound('Company')
      return { companyId: revoked.record.id, revokedAt: revoked.record.tokensRevokedAt.toISOString(), receipt: receiptBody(revoked.receipt) }
    },
  )

  fastify.post(
    '/agents/:agentId/revoke-tokens',
    { schema: { params: AgentParams, response: { 200: AgentTokensRevoked, ...errorResponses(400, 401, 403, 404, 503) } } },
    async (request) => {
      const agentId = canonicalUuid(request.params.agentId)
      const revoked = agentId === undefined ? undefined : await changes.revokeAgentTokens(agentId, callerOf(request).actor)
      if (revoked === undefined) throw errors.notFound('Agent')
      return { agentId: revoked.record.id, revokedAt: revoked.record.tokensRevokedAt!.toISOString(), receipt: receiptBody(revoked.receipt) }
    },
  )

  fastify.get('/companies/:companyId/revoke-tokens/preview', { schema: { params: CompanyParams, response: { 200: Preview, ...errorResponses(401, 403, 404) } } }, async (request) => {
    const companyId = canonicalUuid(request.params.companyId)
    if (companyId === undefined || (await store.getCompany(companyId)) === undefined) throw errors.notFound('Company')
    const [users, openSessions] = await Promise.all([store.activeUsersOf('company', companyId), nodes.openSessions('company', companyId)])
    return { users, openSessions }
  })

  fastify.get('/agents/:agentId/revoke-tokens/preview', { schema: { params: AgentParams, response: { 200: Preview, ...errorResponses(401, 403, 404) } } }, async (request) => {
    const agentId = canonicalUuid(request.params.agentId)
    if (agentId === undefined || (await store.getAgent(agentId)) === undefined) throw errors.notFound('Agent')
    const [users, openSessions] = await Promise.all([store.activeUsersOf('agent', agentId), nodes.openSessions('agent', agentId)])
    return { users, openSessions }
  })
}
