import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid } from '../../domain.js'
import { errorResponses } from '../../http/schemas.js'

const CompanyTokensRevoked = Type.Object({ companyId: Type.String(), revokedAt: Type.String() })
const AgentTokensRevoked = Type.Object({ agentId: Type.String(), revokedAt: Type.String() })

/**
 * SPEC §7.1: every token of a company (or agent) signed before the call answers is refused
 * on every node from then on; a token signed after it is valid. No body.
 */
export const revocationRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { changes }) => {
  fastify.post(
    '/companies/:companyId/revoke-tokens',
    { schema: { params: Type.Object({ companyId: Type.String() }), response: { 200: CompanyTokensRevoked, ...errorResponses(400, 401, 404, 503) } } },
    async (request) => {
      const companyId = canonicalUuid(request.params.companyId)
      const revoked = companyId === undefined ? undefined : await changes.revokeCompanyTokens(companyId)
      if (revoked === undefined) throw errors.notFound('Company')
      return { companyId: revoked.record.id, revokedAt: revoked.record.tokensRevokedAt.toISOString() }
    },
  )

  fastify.post(
    '/agents/:agentId/revoke-tokens',
    { schema: { params: Type.Object({ agentId: Type.String() }), response: { 200: AgentTokensRevoked, ...errorResponses(400, 401, 404, 503) } } },
    async (request) => {
      const agentId = canonicalUuid(request.params.agentId)
      const revoked = agentId === undefined ? undefined : await changes.revokeAgentTokens(agentId)
      if (revoked === undefined) throw errors.notFound('Agent')
      return { agentId: revoked.record.id, revokedAt: revoked.record.tokensRevokedAt!.toISOString() }
    },
  )
}
