import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { isUuid } from '../../domain.js'
import { errorResponses, Text } from '../../http/schemas.js'
import { Company, companyBody, CompanyUsage } from './schemas.js'

const CompanyParams = Type.Object({ companyId: Type.String() })

export const companyRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, limits }) => {
  fastify.post(
    '/companies',
    { schema: { body: Type.Object({ name: Text(200) }), response: { 201: Company, ...errorResponses(400, 401) } } },
    async (request, reply) => reply.code(201).send(companyBody(await store.createCompany(request.body.name))),
  )

  fastify.get('/companies/:companyId', { schema: { params: CompanyParams, response: { 200: Company, ...errorResponses(401, 404) } } }, async (request) => {
    const company = isUuid(request.params.companyId) ? await store.getCompany(request.params.companyId) : undefined
    if (company === undefined) throw errors.notFound('Company')
    return companyBody(company)
  })

  // SPEC §7.3: how near a company is to the limits on what it may hold of the shared store and caches.
  fastify.get('/companies/:companyId/usage', { schema: { params: CompanyParams, response: { 200: CompanyUsage, ...errorResponses(401, 404) } } }, async (request) => {
    const usage = isUuid(request.params.companyId) ? await store.companyUsage(request.params.companyId, limits.newUsers) : undefined
    if (usage === undefined) throw errors.notFound('Company')
    return {
      companyId: usage.companyId,
      users: usage.users,
      maxUsers: limits.newUsers.maxUsers,
      newUsersAvailable: usage.newUsersAvailable,
      newUsersBurst: limits.newUsers.burst,
      newUsersPerMinute: limits.newUsers.perMinute,
      liveTokenRevocations: usage.liveTokenRevocations,
      maxLiveTokenRevocations: limits.maxLiveTokenRevocations,
    }
  })

  fastify.patch(
    '/companies/:companyId',
    {
      schema: {
        params: CompanyParams,
        body: Type.Object({ name: Type.Optional(Text(200)), defaultAgentId: Type.Optional(Text(64)) }),
        response: { 200: Company, ...errorResponses(400, 401, 404) },
      },
    },
    async (request) => {
      const { companyId } = request.params
      const { name, defaultAgentId } = request.body
      if (!isUuid(companyId)) throw errors.notFound('Company')
      if (defaultAgentId !== undefined && !isUuid(defaultAgentId)) {
        if ((await store.getCompany(companyId)) === undefined) throw errors.notFound('Company')
        throw errors.invalidDefaultAgent()
      }
      const updated = await store.updateCompany(companyId, { name, defaultAgentId })
      if (updated === undefined) throw errors.notFound('Company')
      if (updated === 'foreign-agent') throw errors.invalidDefaultAgent()
      return companyBody(updated)
    },
  )
}
