import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid, isUuid } from '../../domain.js'
import { callerOf } from '../../http/admin-callers.js'
import { errorResponses, Text } from '../../http/schemas.js'
import { CustomerUser, customerUserBody, Receipt, receiptBody } from './schemas.js'

const UserParams = Type.Object({ customerUserId: Type.String() })

export const customerUserRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, changes }) => {
  // SPEC §10.2: a user found by the id the customer knows it by.
  fastify.get(
    '/customer-users',
    {
      schema: {
        querystring: Type.Object({ companyId: Type.Optional(Text(64)), externalId: Type.Optional(Text(255)) }, { additionalProperties: false }),
        response: { 200: CustomerUser, ...errorResponses(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const { companyId, externalId } = request.query
      if (companyId === undefined || externalId === undefined) throw errors.validation('companyId and externalId are both required')
      const company = canonicalUuid(companyId)
      const user = company === undefined ? undefined : await store.getUserByExternalId(company, externalId)
      if (user === undefined) throw errors.notFound('Customer user')
      return customerUserBody(user)
    },
  )

  fastify.get(
    '/customer-users/:customerUserId',
    { schema: { params: UserParams, response: { 200: CustomerUser, ...errorResponses(401, 403, 404) } } },
    async (request) => {
      const { customerUserId } = request.params
      const user = isUuid(customerUserId) ? await store.getUser(customerUserId) : undefined
      if (user === undefined) throw errors.notFound('Customer user')
      return customerUserBody(user)
    },
  )

  fastify.patch(
    '/customer-users/:customerUserId',
    {
      schema: {
        params: UserParams,
        body: Type.Object({ active: Type.Boolean() }),
        response: { 200: Type.Object({ ...CustomerUser.properties, receipt: Receipt }), ...errorResponses(400, 401, 403, 404, 503) },
      },
    },
    async (request) => {
      const { customerUserId } = request.params
      // Deactivation takes effect on every node before this answers (SPEC §4).
      const updated = isUuid(customerUserId) ? await changes.setUserActive(customerUserId, request.body.active, callerOf(request).actor) : undefined
      if (updated === undefined) throw errors.notFound('Customer user')
      return { ...customerUserBody(updated.record), receipt: receiptBody(updated.receipt) }
    },
  )
}
