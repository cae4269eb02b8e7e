import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { isUuid } from '../../domain.js'
import { errorResponses } from '../../http/schemas.js'
import { CustomerUser, customerUserBody } from './schemas.js'

const UserParams = Type.Object({ customerUserId: Type.String() })

export const customerUserRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, changes }) => {
  fastify.get(
    '/customer-users/:customerUserId',
    { schema: { params: UserParams, response: { 200: CustomerUser, ...errorResponses(401, 404) } } },
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
        response: { 200: CustomerUser, ...errorResponses(400, 401, 404, 503) },
      },
    },
    async (request) => {
      const { customerUserId } = request.params
      // Deactivation takes effect on every node before this answers (SPEC §4).
      const updated = isUuid(customerUserId) ? await changes.setUserActive(customerUserId, request.body.active) : undefined
      if (updated === undefined) throw errors.notFound('Customer user')
      return customerUserBody(updated.record)
    },
  )
}
