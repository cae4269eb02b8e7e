import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errors } from '../../errors.js'
import { isUuid } from '../../domain.js'
import { errorResponses, Text } from '../../http/schemas.js'
import { Company, companyBody, CompanyUsage } from './schemas.js'

const CompanyParams = Type.Object({ companyId: Type.String() })

const DEFAULT_SEARCH_LIMIT = 50
const MAX_SEARCH_LIMIT = 100

/** A page's position (the last name and id it held) as the opaque `next`; not a secret, only a place in an ordering. */
const encodePosition = (company: { name: string; id: string }) => Buffer.from(JSON.stringify([company.name, company.id])).toString('base64url')

function decodePosition(text: string): { name: string; id: string } {
  try {
    const [name, id] = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown[]
    if (typeof name === 'string' && typeof id === 'string' && isUuid(id)) return { name, id }
  } catch {
    // not a cursor of ours
  }
  throw errors.validation('after must be a cursor returned as next by this listing')
}

function limitOf(text: string | undefined): number {
  if (text === undefined) return DEFAULT_SEARCH_LIMIT
  const limit = Number(text)
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_SEARCH_LIMIT) throw errors.validation(`limit must be an integer from 1 to ${MAX_SEARCH_LIMIT}`)
  return limit
}

export const companyRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { store, limits }) => {
  // SPEC §10.2: companies by name, a page at a time.
  fastify.get(
    '/companies',
    {
      schema: {
        querystring: Type.Object(
          {
            query: Type.Optional(Text(200, 0)),
            limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,6}$', description: `1 to ${MAX_SEARCH_LIMIT}, default ${DEFAULT_SEARCH_LIMIT}` })),
            after: Type.Optional(Text(1024)),
          },
          { additionalProperties: false },
        ),
        response: {
          200: Type.Object({
            companies: Type.Array(Company),
            next: Type.Union([Type.String(), Type.Null()], { description: 'pass as `after` for the next page; null at the end' }),
          }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request) => {
      const { query, after } = request.query
      const limit = limitOf(request.query.limit)
      // One more than asked: whether there is a next page, without a count.
      const found = await store.searchCompanies(query === '' ? undefined : query, limit + 1, after === undefined ? undefined : decodePosition(after))
      const page = found.slice(0, limit)
      return { companies: page.map(companyBody), next: found.length > limit ? encodePosition(page.at(-1)!) : null }
    },
  )

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

  // SPEC §7.3: how near a company is to the limits on what it may hold of the shared store and caches.
  fastify.get('/companies/:companyId/usage', { schema: { params: CompanyParams, response: { 200: CompanyUsage, ...errorResponses(401, 404) } } }, async (request) => {
    const usage = isUuid(request.params.companyId) ? await store.companyUsage(request.params.companyId, limits.newUsers) : undefined
    if (usage === undefined) throw errors.notFound('Company')
    return {
      companyId: usage.companyId,
      users: usage.users,
      maxUsers: limits.newUsers.maxUsers,
      newUsersAvailable: usage.newUsersAvailable,
      newUsersBurst: limits.newUsers.burst,
      newUsersPerMinute: limits.newUsers.perMinute,
      liveTokenRevocations: usage.liveTokenRevocations,
      maxLiveTokenRevocations: limits.maxLiveTokenRevocations,
    }
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
