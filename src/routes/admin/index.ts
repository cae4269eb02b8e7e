import type { FastifyInstance } from 'fastify'
import type { Changes } from '../../changes.js'
import type { StoreReads } from '../../store/store.js'
import { bearerToken } from '../../auth/verify.js'
import { errors } from '../../errors.js'
import { companyRoutes } from './companies.js'
import { agentRoutes } from './agents.js'
import { apiKeyRoutes } from './api-keys.js'
import { customerUserRoutes } from './customer-users.js'

/** What the admin routes use: plain reads and writes, and the writes every node must see. */
export interface AdminServices {
  store: StoreReads
  changes: Changes
}

export interface AdminRoutesOptions extends AdminServices {
  adminTokenMatches(presented: string): boolean
}

/** SPEC §4: everything under /admin/v1 needs `Authorization: Bearer <ADMIN_TOKEN>`. */
export async function adminRoutes(fastify: FastifyInstance, { adminTokenMatches, store, changes }: AdminRoutesOptions): Promise<void> {
  fastify.addHook('onRequest', async (request) => {
    const token = bearerToken(request.headers.authorization)
    if (token === undefined || !adminTokenMatches(token)) throw errors.invalidAdminToken()
  })
  // Unknown admin paths answer 404 too, but only to a caller holding the admin token.
  fastify.setNotFoundHandler(async (request) => {
    throw errors.routeNotFound(request.method, request.url)
  })
  const services = { store, changes }
  await fastify.register(companyRoutes, services)
  await fastify.register(agentRoutes, services)
  await fastify.register(apiKeyRoutes, services)
  await fastify.register(customerUserRoutes, services)
}
