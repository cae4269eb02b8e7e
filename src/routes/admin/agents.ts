import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { isUuid } from '../../domain.js'
import { callerOf } from '../../http/admin-callers.js'
import { errorResponses, Text } from '../../http/schemas.js'
import { Agent, agentBody, Receipt, receiptBody } from './schemas.js'

export const agentRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, changes }) => {
  // The company's agents, for the console's Company page (SPEC §10.3).
  fastify.get(
    '/companies/:companyId/agents',
    { schema: { params: Type.Object({ companyId: Type.String() }), response: { 200: Type.Array(Agent), ...errorResponses(401, 404) } } },
    async (request) => {
      const { companyId } = request.params
      const agents = isUuid(companyId) ? await store.listAgents(companyId) : undefined
      if (agents === undefined) throw errors.notFound('Company')
      return agents.map(agentBody)
    },
  )

  fastify.post(
    '/companies/:companyId/agents',
    {
      schema: {
        params: Type.Object({ companyId: Type.String() }),
        body: Type.Object({ name: Text(200), active: Type.Optional(Type.Boolean()) }),
        response: { 201: Agent, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      const { companyId } = request.params
      const agent = isUuid(companyId) ? await store.createAgent(companyId, request.body.name, request.body.active ?? true) : undefined
      if (agent === undefined) throw errors.notFound('Company')
      return reply.code(201).send(agentBody(agent))
    },
  )

  fastify.patch(
    '/agents/:agentId',
    {
      schema: {
        params: Type.Object({ agentId: Type.String() }),
        body: Type.Object({ name: Type.Optional(Text(200)), active: Type.Optional(Type.Boolean()) }),
        response: { 200: Type.Object({ ...Agent.properties, receipt: Receipt }), ...errorResponses(400, 401, 403, 404, 503) },
      },
    },
    async (request) => {
      const { agentId } = request.params
      // Deactivation takes effect on every node before this answers (SPEC §4).
      const updated = isUuid(agentId) ? await changes.updateAgent(agentId, request.body, callerOf(request).actor) : undefined
      if (updated === undefined) throw errors.notFound('Agent')
      return { ...agentBody(updated.record), receipt: receiptBody(updated.receipt) }
    },
  )
}
