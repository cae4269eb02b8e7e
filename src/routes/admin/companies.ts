import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { isUuid } from '../../domain.js'
import { errorResponses, Text } from '../../http/schemas.js'
import { Company, companyBody } from './schemas.js'

const CompanyParams = Type.Object({ companyId: Type.String() })

export const companyRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store }) => {
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
