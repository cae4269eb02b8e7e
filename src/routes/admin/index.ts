import type { FastifyInstance } from 'fastify'
import type { Changes } from '../../changes.js'
import type { NewUserLimits, StoreReads } from '../../store/store.js'
import type { TokenRevoker } from '../../auth/revoke-token.js'
import { resolveAdminCallers, type AdminCallersOptions } from '../../http/admin-callers.js'
import { errors } from '../../errors.js'
import { enforceRoles } from './roles.js'
import { companyRoutes } from './companies.js'
import { agentRoutes } from './agents.js'
import { apiKeyRoutes } from './api-keys.js'
import { customerUserRoutes } from './customer-users.js'
import { revocationRoutes } from './revocations.js'
import { eventRoutes } from './events.js'
import { webhookRoutes } from './webhooks.js'
import { operatorRoutes } from './operators.js'
import { nodeRoutes, type NodesView } from './nodes.js'
import { userRevocationRoutes } from './user-revocations.js'
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
  /** SPEC §10.2: one token revoked by the admin API, whatever its company */
  revoker: Pick<TokenRevoker, 'revokeAnyCompany'>
  /** SPEC §10.2: the live nodes, and their open sessions of a company or agent */
  nodes: NodesView
}

/** What one company may hold of the shared store and caches (SPEC §7.3). */
export interface CompanyLimits {
  newUsers: NewUserLimits
  maxLiveTokenRevocations: number
}

/** How each request's caller is found (SPEC §10.1, §10.3), with the failed-credential limit (SPEC §7.3). */
export type AdminRoutesOptions = AdminServices & AdminCallersOptions

/**
 * SPEC §4, §10.1: everything under /admin/v1 needs a caller — ADMIN_TOKEN, an operator's
 * token, or a console session — whose role allows the call (roles.ts).
 */
export async function adminRoutes(fastify: FastifyInstance, options: AdminRoutesOptions): Promise<void> {
  const { credentials, consoleSessions, noteUsed } = options
  const { store, changes, cursorSecret, webhookDestinations, limits, revoker, nodes } = options
  const services: AdminServices = { store, changes, cursorSecret, webhookDestinations, limits, revoker, nodes }
  // Unknown admin paths included: a guess on any of them counts.
  await resolveAdminCallers(fastify, { credentials, consoleSessions, noteUsed })
  enforceRoles(fastify)
  // Unknown admin paths answer 404 too, but only to a known caller.
  fastify.setNotFoundHandler(async (request) => {
    throw errors.routeNotFound(request.method, request.url)
  })
  await fastify.register(companyRoutes, services)
  await fastify.register(agentRoutes, services)
  await fastify.register(apiKeyRoutes, services)
  await fastify.register(customerUserRoutes, services)
  await fastify.register(revocationRoutes, services)
  await fastify.register(eventRoutes, services)
  await fastify.register(webhookRoutes, services)
  await fastify.register(operatorRoutes, services)
  await fastify.register(nodeRoutes, services)
  await fastify.register(userRevocationRoutes, services)
}
