import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { AdminServices } from './index.js'
import { errorResponses } from '../../http/schemas.js'

const Timestamp = Type.Union([Type.String(), Type.Null()])

/** SPEC §10.2: one live node. */
export const NodeView = Type.Object({
  nodeId: Type.String(),
  version: Type.Union([Type.String(), Type.Null()]),
  startedAt: Timestamp,
  ready: Type.Boolean(),
  trusted: Type.Boolean({ description: 'the bus vouches for its cache' }),
  untrustedSince: Type.Union([Type.String(), Type.Null()], { description: 'since when it has not trusted its cache; null: it does' }),
  lastChangeAt: Type.Union([Type.String(), Type.Null()], { description: 'when it applied the last change, from any node' }),
  changeLogReadAt: Type.Union([Type.String(), Type.Null()], { description: 'its last whole read of the change log' }),
  behind: Type.Object({ changes: Type.Integer(), ms: Type.Number() }, { description: 'changes committed since that read, and how long ago it was' }),
  cache: Type.Object({ users: Type.Integer(), bytes: Type.Number() }),
  sessions: Type.Integer({ description: 'open sessions (SPEC §8.1)' }),
  eventStreams: Type.Integer(),
  clockOffsetMs: Type.Union([Type.Number(), Type.Null()], { description: "its clock against PostgreSQL's; null before a first reading" }),
  redis: Type.Union([Type.Object({ follows: Type.Union([Type.String(), Type.Null()]), subscribed: Type.Boolean() }), Type.Null()], { description: 'null: the embedded single node' }),
})

export type NodeViewBody = (typeof NodeView)['static']

/** What the admin API asks of the live nodes (SPEC §10.2). */
export interface NodesView {
  /** every live node */
  list(): Promise<NodeViewBody[]>
  /** open sessions of a company or an agent across the live nodes */
  openSessions(scope: 'company' | 'agent', id: string): Promise<number>
}

export const nodeRoutes: FastifyPluginAsyncTypebox<AdminServices> = async (fastify, { nodes }) => {
  fastify.get('/nodes', { schema: { response: { 200: Type.Object({ nodes: Type.Array(NodeView) }), ...errorResponses(401, 403) } } }, async () => ({ nodes: await nodes.list() }))
}
