import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Logger } from 'pino'
import { ConfigError, type Config } from './config.js'
import { createLogger } from './logger.js'
import { gatewayPlugin } from './gateway.js'
import { bearerToken, type Identity, type VerifyToken } from './auth/verify.js'
import { BEARER_CHALLENGE, denialBody, errors, type ErrorBody } from './errors.js'
import type { Metrics } from './metrics.js'
import { answerUndecided, undecidedReporter } from './http/undecided.js'
import { body } from './http/error-handler.js'
import type { IdentityBody } from './auth/identity-body.js'
import type { OpenedSession, Sessions } from './sessions/sessions.js'

/**
 * SPEC §8.1: a long-lived connection's token, watched. Refused: the verify endpoint's status
 * and body, nothing kept. Accepted: the verify endpoint's 200 body, and a signal that aborts
 * (its `reason` a `{code, message}` of §3.3, or NODE_CLOSING) the moment the token stops
 * being valid; `close()` when the connection ended by itself (idempotent).
 */
export type ChatSession =
  | { ok: false; statusCode: 401 | 503; body: ErrorBody }
  | { ok: true; identity: IdentityBody; signal: AbortSignal; close: () => void }

/**
 * What `openChatSession` answers for what the sessions gave: a refusal as the verify
 * endpoint's 401, an accepted token's session as itself (it is `{ ok, identity, signal,
 * close }`; no wrapper, see sessions/session.ts for why every byte counts).
 */
export function chatSessionOf(opened: OpenedSession): ChatSession {
  return opened.ok ? opened : { ok: false, statusCode: 401, body: denialBody(opened.denial) }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** onRequest (or preHandler) hook that admits a request only with a valid chat token (SPEC §3.3 checks). */
    requireChatToken: (request: FastifyRequest, reply: FastifyReply) => Promise<void>
    /** SPEC §8.1: checks a token and, when accepted, watches it (see `ChatSession`) */
    openChatSession: (token: string | undefined) => Promise<ChatSession>
    /** the open sessions, and the entries of their indexes (all 0 once every session ended) */
    chatSessionStats: () => ReturnType<Sessions['stats']>
  }
  interface FastifyRequest {
    /** the verified identity, set by `requireChatToken` */
    chatAuth: Identity | null
  }
}

export type ChatAuthPluginOptions =
  /**
   * The gateway's own settings (`loadConfig()`): the plugin joins the gateway's PostgreSQL and
   * Redis as one more node, and closes it with the Fastify instance.
   */
  | { config: Config; logger?: Logger }
  /**
   * a gateway from `createGateway` that the caller owns (and closes); the plugin uses its
   * verifier, and its metrics to count verifications that could not be decided
   */
  | { gateway: { verifyToken: VerifyToken; metrics?: Metrics; sessions?: Sessions } }

/**
 * An in-process verifier is a node: it caches, so it must hear every change. Its own embedded
 * store would be a second, unconnected store, and a node without Redis next to the gateway
 * would never hear the gateway's changes: both are refused before anything is opened.
 */
function checkJoinsTheGateway(config: Config): void {
  const missing = [config.databaseUrl ? undefined : 'DATABASE_URL', config.redis ? undefined : 'REDIS_URL'].filter((name) => name !== undefined)
  if (missing.length) {
    throw new ConfigError(
      missing.join(' and '),
      'the in-process verifier joins the gateway as one more node: give it the gateway\'s DATABASE_URL and REDIS_URL ' +
        '(it never opens an embedded store of its own; without Redis, pass { gateway } from a createGateway you own)',
    )
  }
}

/**
 * The gateway's node (gateway.ts, the same assembly as the server, without its routes),
 * inside a context of its own so that none of its decorations reach the host app; it closes
 * with the host.
 */
async function ownVerifier(fastify: FastifyInstance, config: Config, logger: Logger | undefined): Promise<{ verifyToken: VerifyToken; metrics: Metrics; sessions: Sessions }> {
  checkJoinsTheGateway(config)
  let verifier: { verifyToken: VerifyToken; metrics: Metrics; sessions: Sessions } | undefined
  await fastify.register(async (node) => {
    await node.register(gatewayPlugin, { config, logger: logger ?? createLogger(config) })
    verifier = { verifyToken: node.gateway.verifyToken, metrics: node.gateway.metrics, sessions: node.gateway.sessions }
  })
  return verifier!
}

/**
 * For a Node chat backend that verifies in-process, against the same stores as the gateway:
 * `app.register(chatAuthPlugin, { config: loadConfig() })`, then
 * `{ onRequest: app.requireChatToken }` on the routes to protect (before any body is read).
 */
export const chatAuthPlugin = fp<ChatAuthPluginOptions>(
  async (fastify, options) => {
    const { verifyToken, metrics, sessions } = 'config' in options ? await ownVerifier(fastify, options.config, options.logger) : options.gateway
    // An outage fails every request alike: its cause is logged once per interval, all counted.
    const reportUndecided = undecidedReporter(fastify.log, metrics)
    fastify.decorateRequest('chatAuth', null)
    fastify.decorate('requireChatToken', async (request: FastifyRequest, reply: FastifyReply) => {
      let verdict
      try {
        verdict = await verifyToken(bearerToken(request.headers.authorization))
      } catch (error) {
        reportUndecided(error, request.id)
        return answerUndecided(reply)
      }
      if (!verdict.ok) return reply.code(401).headers(BEARER_CHALLENGE).send(denialBody(verdict.denial))
      request.chatAuth = verdict.identity
    })
    fastify.decorate('openChatSession', async (token: string | undefined): Promise<ChatSession> => {
      if (sessions === undefined) throw new Error('openChatSession needs the gateway\'s sessions: pass { config }, or { gateway } from createGateway')
      let opened
      try {
        opened = await sessions.open(token)
      } catch (error) {
        reportUndecided(error, 'openChatSession')
        return { ok: false, statusCode: 503, body: body(errors.unavailable()) }
      }
      return chatSessionOf(opened)
    })
    fastify.decorate('chatSessionStats', () => (sessions === undefined ? { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 } : sessions.stats()))
  },
  { name: 'chat-auth', fastify: '5.x' },
)
