import { randomUUID } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { canonicalUuid } from '../../domain.js'
import { generateOperatorToken } from '../../auth/operators.js'
import { errorResponses, Text } from '../../http/schemas.js'
import type { OperatorRecord } from '../../store/store.js'

const RoleSchema = Type.Union([Type.Literal('viewer'), Type.Literal('operator'), Type.Literal('admin')], {
  description: 'viewer: every read; operator: also revocations, (de)activation of users and agents, redelivery; admin: everything',
})
const Operator = Type.Object({
  id: Type.String(),
  name: Type.String(),
  role: RoleSchema,
  createdAt: Type.String(),
  revokedAt: Type.Union([Type.String(), Type.Null()]),
  lastUsedAt: Type.Union([Type.String(), Type.Null()], { description: 'written at most once a minute' }),
})
const CreatedOperator = Type.Object({
  id: Type.String(),
  name: Type.String(),
  role: RoleSchema,
  token: Type.String({ description: '`opt_…`: the operator\'s bearer token for the admin API and the console. Shown only in this answer' }),
  createdAt: Type.String(),
})

const iso = (date: Date | null) => (date === null ? null : date.toISOString())
const operatorBody = (o: OperatorRecord) => ({ id: o.id, name: o.name, role: o.role, createdAt: o.createdAt.toISOString(), revokedAt: iso(o.revokedAt), lastUsedAt: iso(o.lastUsedAt) })

/** SPEC §10.1: named operators with a role, each with a token of its own (admin only: roles.ts). */
export const operatorRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store }) => {
  fastify.post(
    '/operators',
    {
      schema: {
        body: Type.Object({ name: Text(200), role: RoleSchema }, { additionalProperties: false }),
        response: { 201: CreatedOperator, ...errorResponses(400, 401, 403) },
      },
    },
    async (request, reply) => {
      const { token, tokenHash } = generateOperatorToken()
      const created = await store.createOperator({ id: randomUUID(), name: request.body.name, role: request.body.role, tokenHash })
      // The only time the token is shown; only its hash is kept.
      return reply.code(201).send({ id: created.id, name: created.name, role: created.role, token, createdAt: created.createdAt.toISOString() })
    },
  )

  fastify.get('/operators', { schema: { response: { 200: Type.Array(Operator), ...errorResponses(401, 403) } } }, async () => (await store.listOperators()).map(operatorBody))

  fastify.delete(
    '/operators/:operatorId',
    {
      schema: {
        params: Type.Object({ operatorId: Type.String() }),
        response: { 200: Type.Object({ id: Type.String(), revokedAt: Type.String() }), ...errorResponses(401, 403, 404) },
      },
    },
    async (request) => {
      // Its token and its console sessions are refused on every node from this commit on.
      const operatorId = canonicalUuid(request.params.operatorId)
      const revoked = operatorId === undefined ? undefined : await store.revokeOperator(operatorId)
      if (revoked === undefined) throw errors.notFound('Operator')
      return { id: revoked.id, revokedAt: revoked.revokedAt.toISOString() }
    },
  )
}
