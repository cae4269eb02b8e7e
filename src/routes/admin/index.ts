import type { FastifyInstance } from 'fastify'
import type { Gateway } from '../../gateway.js'
import { bearerToken } from '../../auth/verify.js'
import { errors } from '../../errors.js'
import { companyRoutes } from './companies.js'
import { agentRoutes } from './agents.js'
import { apiKeyRoutes } from './api-keys.js'
import { customerUserRoutes } from './customer-users.js'

/** SPEC §4: everything under /admin/v1 needs `Authorization: Bearer <ADMIN_TOKEN>`. */
export async function adminRoutes(fastify: FastifyInstance, { gateway }: { gateway: Gateway }): Promise<void> {
  fastify.addHook('onRequest', async (request) => {
    const token = bearerToken(request.headers.authorization)
    if (token === undefined || !gateway.adminTokenMatches(token)) throw errors.invalidAdminToken()
  })
  // Unknown admin paths answer 404 too, but only to a caller holding the admin token.
  fastify.setNotFoundHandler(async (request) => {
    throw errors.routeNotFound(request.method, request.url)
  })
  await fastify.register(companyRoutes, { gateway })
  await fastify.register(agentRoutes, { gateway })
  await fastify.register(apiKeyRoutes, { gateway })
  await fastify.register(customerUserRoutes, { gateway })
}
