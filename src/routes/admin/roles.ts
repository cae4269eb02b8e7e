import type { FastifyInstance } from 'fastify'
import { roleAllows, type Role } from '../../domain.js'
import { errors } from '../../errors.js'
import { callerOf } from '../../http/admin-callers.js'

/** What a call needs: a role, or (where the body decides) a role for each body. */
type Needs = Role | ((body: unknown) => Role)

const has = (body: unknown, field: string): boolean => typeof body === 'object' && body !== null && Object.hasOwn(body, field)

/**
 * SPEC §10.1: the one table of what each role may call, every route of the admin API by
 * `METHOD /admin/v1/path/:param` as it is registered. `viewer`: every read but the operators
 * (SPEC §10.1 names their listing admin's); `operator`: also revocations, (de)activation of
 * users and agents, and redelivery; `admin`: everything. A route missing here is refused to
 * every caller (403): test/stores/api/admin/roles.test.ts fails when one is.
 */
export const ROUTE_ROLES: Record<string, Needs> = {
  'GET /admin/v1/companies': 'viewer',
  'GET /admin/v1/companies/:companyId': 'viewer',
  'GET /admin/v1/companies/:companyId/usage': 'viewer',
  'GET /admin/v1/companies/:companyId/agents': 'viewer',
  'GET /admin/v1/companies/:companyId/api-keys': 'viewer',
  'GET /admin/v1/companies/:companyId/events': 'viewer',
  'GET /admin/v1/companies/:companyId/webhooks': 'viewer',
  'GET /admin/v1/companies/:companyId/revoke-tokens/preview': 'viewer',
  'GET /admin/v1/agents/:agentId/revoke-tokens/preview': 'viewer',
  'GET /admin/v1/customer-users': 'viewer',
  'GET /admin/v1/customer-users/:customerUserId': 'viewer',
  'GET /admin/v1/webhooks/:webhookId/deliveries': 'viewer',
  'GET /admin/v1/nodes': 'viewer',

  'POST /admin/v1/customer-users/:customerUserId/invalidate': 'operator',
  'POST /admin/v1/tokens/revoke': 'operator',
  'POST /admin/v1/companies/:companyId/revoke-tokens': 'operator',
  'POST /admin/v1/agents/:agentId/revoke-tokens': 'operator',
  'PATCH /admin/v1/customer-users/:customerUserId': 'operator',
  // (De)activating an agent is an operator's; renaming it, an admin's.
  'PATCH /admin/v1/agents/:agentId': (body) => (has(body, 'name') ? 'admin' : 'operator'),
  'POST /admin/v1/webhook-deliveries/:deliveryId/redeliver': 'operator',

  'POST /admin/v1/companies': 'admin',
  'PATCH /admin/v1/companies/:companyId': 'admin',
  'POST /admin/v1/companies/:companyId/agents': 'admin',
  'POST /admin/v1/companies/:companyId/api-keys': 'admin',
  'DELETE /admin/v1/api-keys/:keyId': 'admin',
  'POST /admin/v1/companies/:companyId/webhooks': 'admin',
  'DELETE /admin/v1/webhooks/:webhookId': 'admin',
  'POST /admin/v1/operators': 'admin',
  'GET /admin/v1/operators': 'admin',
  'DELETE /admin/v1/operators/:operatorId': 'admin',
}

/** The role a call needs; undefined: the route is not in the table (refused to every caller). */
export function roleNeeded(method: string, url: string, body: unknown): Role | undefined {
  // Fastify answers HEAD with the GET route: it needs what the GET needs.
  const needs = ROUTE_ROLES[`${method === 'HEAD' ? 'GET' : method} ${url}`]
  return typeof needs === 'function' ? needs(body) : needs
}

/**
 * Checks the caller's role on every route of this context, once the body is parsed (a PATCH
 * of an agent needs the role its body asks for) and before it is validated or handled:
 * nothing runs for a call beyond the caller's role. An unknown path is not a route: its 404
 * is answered as before.
 */
export function enforceRoles(fastify: FastifyInstance): void {
  fastify.addHook('preValidation', async (request) => {
    const url = request.routeOptions.url
    if (url === undefined || request.is404) return
    const needed = roleNeeded(request.method, url, request.body)
    if (needed === undefined || !roleAllows(callerOf(request).role, needed)) throw errors.insufficientRole()
  })
}
