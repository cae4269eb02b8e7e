import type { FastifyInstance } from 'fastify'
import type { Changes } from '../../changes.js'
import type { NewUserLimits, StoreReads } from '../../store/store.js'
import type { CredentialGuard } from '../../http/credential-guard.js'
import { errors } from '../../errors.js'
import { companyRoutes } from './companies.js'
import { agentRoutes } from './agents.js'
import { apiKeyRoutes } from './api-keys.js'
import { customerUserRoutes } from './customer-users.js'
import { revocationRoutes } from './revocations.js'
import { eventRoutes } from './events.js'
import { webhookRoutes } from './webhooks.js'
import type { Destinations } from '../../webhooks/destinations.js'

/** What the admin routes use: plain reads and writes, and the writes every node must see. */
export interface AdminServices {
  store: StoreReads
  changes: Changes
  /** the secret event cursors are MACed with (the node's event streams read it once for both) */
  cursorSecret: () => Promise<Buffer>
  /** where a webhook may send (SPEC §9.3): a new one's URL is checked against it */
  webhookDestinations: Pick<Destinations, 'refusal'>
  /** SPEC §7.3: the per-company limits, for the usage read */
  limits: CompanyLimits
}

/** What one company may hold of the shared store and caches (SPEC §7.3). */
export interface CompanyLimits {
  newUsers: NewUserLimits
  maxLiveTokenRevocations: number
}

export interface AdminRoutesOptions extends AdminServices {
  /** admin-token check with the failed-credential limit (SPEC §7.3) */
  credentials: Pick<CredentialGuard, 'admin'>
}

/** SPEC §4: everything under /admin/v1 needs `Authorization: Bearer <ADMIN_TOKEN>`. */
export async function adminRoutes(fastify: FastifyInstance, { credentials, store, changes, cursorSecret, webhookDestinations, limits }: AdminRoutesOptions): Promise<void> {
  // Unknown admin paths included: a guess on any of them counts.
  fastify.addHook('onRequest', async (request) => credentials.admin(request))
  // Unknown admin paths answer 404 too, but only to a caller holding the admin token.
  fastify.setNotFoundHandler(async (request) => {
    throw errors.routeNotFound(request.method, request.url)
  })
  const services = { store, changes, cursorSecret, webhookDestinations, limits }
  await fastify.register(companyRoutes, services)
  await fastify.register(agentRoutes, services)
  await fastify.register(apiKeyRoutes, services)
  await fastify.register(customerUserRoutes, services)
  await fastify.register(revocationRoutes, services)
  await fastify.register(eventRoutes, services)
  await fastify.register(webhookRoutes, services)
}
