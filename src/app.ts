import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyPluginAsync, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { Logger } from 'pino'
import type { Config } from './config.js'
import { gatewayPlugin, type Gateway, type GatewayOptions } from './gateway.js'
import { body, installErrorHandling, toApiError } from './http/error-handler.js'
import { tokenRoute } from './routes/token.js'
import { invalidateRoute } from './routes/invalidate.js'
import { revokeTokenRoute } from './routes/revoke-token.js'
import { verifyRoute } from './routes/verify/route.js'
import { answerUnroutedVerifyCall, refusedVerifyCall } from './routes/verify/refused.js'
import { acceptEveryMethod, connectionOptions, hardenServer } from './http/connections.js'
import { clientErrorAnswerer } from './http/client-errors.js'
import { serveConnections, type NodeInternals } from './http/node-internals.js'
import { nodeInternals } from './http/node-internals-check.js'
import { createCredentialGuard } from './http/credential-guard.js'
import { registerFailureLimits } from './http/failure-limits.js'
import { operationsRoutes } from './routes/operations.js'
import { adminRoutes } from './routes/admin/index.js'
import { registerOpenApi } from './http/openapi.js'
import { createAdminCallers } from './auth/operators.js'
import { createConsoleSessions } from './auth/console-sessions.js'
import { consoleRoutes } from './routes/console/index.js'
import { eventStreamRoute } from './routes/events-stream.js'
import { oauthRoutes } from './routes/oauth.js'
import { createOAuthService } from './auth/oauth.js'

export interface AppOptions {
  /** what the node uses of Node's internals (buildApp's); by default the start-up check's */
  internals?: NodeInternals
}

/**
 * The application as a Fastify plugin: routes, error handling and request metrics over the
 * node that `gatewayPlugin` put on the instance. It never listens; `server.ts` does.
 */
export default async function app(fastify: FastifyInstance, options: AppOptions = {}): Promise<void> {
  const { gateway } = fastify
  const internals = options.internals ?? (await nodeInternals({ use: gateway.config.nodeInternals, log: fastify.log }))
  serveConnections(fastify.server, internals.connections)
  installErrorHandling(fastify)
  countRequests(fastify, gateway)
  acceptEveryMethod(fastify)
  // Only JSON bodies: any other content type is a 415 (the verify routes accept anything).
  fastify.removeContentTypeParser('text/plain')

  // Each part gets the services it uses, never the whole gateway.
  const { authenticateApiKey, tokens, changes, revoker, verifyToken, store, bus, metrics, keyring, config } = gateway
  const failures = await registerFailureLimits(fastify, { limit: config.limits.authFailureLimit, redis: config.redis, redisPrefix: config.redisPrefix })
  // SPEC §10.1: ADMIN_TOKEN or an operator's token, looked up in the store on every call.
  const adminCallers = createAdminCallers({
    store,
    adminTokenMatches: (token) => gateway.adminTokenMatches(token),
    onUseNotRecorded: (error) => fastify.log.warn({ err: error }, "could not record an operator's use"),
  })
  const credentials = createCredentialGuard({ authenticateApiKey, adminCallerOf: adminCallers.callerOf, failures })
  // SPEC §10.3: the console's sessions, in the store; none with CONSOLE=false.
  const consoleSessions = config.console.enabled
    ? createConsoleSessions({ store, adminTokenHashMatches: (hash) => gateway.adminTokenHashMatches(hash), idleSeconds: config.console.sessionIdleSeconds })
    : undefined
  // Before the routes: the API description is collected from each route as it is added.
  await registerOpenApi(fastify)
  await fastify.register(tokenRoute, { credentials, tokens })
  await fastify.register(invalidateRoute, { credentials, changes })
  await fastify.register(revokeTokenRoute, { credentials, revoker })
  await fastify.register(verifyRoute, { verifyToken, writeHead: internals.writeHead, metrics })
  await fastify.register(oauthRoutes, { credentials, oauth: createOAuthService({ verifyToken, revoker }) })
  // The node's event streams end before the server closes: an open one would keep it open.
  const { hub, cursorSecret } = gateway.eventStreams
  fastify.addHook('preClose', (done) => (hub.close(), done()))
  await fastify.register(eventStreamRoute, { credentials, hub, cursorSecret })
  await fastify.register(operationsRoutes, { store, bus, metrics, keyring, warmedUp: gateway.warmedUp, revocationsLoaded: () => gateway.states.revokedTokens.loaded, clock: gateway.clock.state, jwksMaxAgeSeconds: config.jwksMaxAgeSeconds })
  const limits = { newUsers: config.newUsers, maxLiveTokenRevocations: config.maxLiveTokenRevocations }
  // SPEC §10.2: the live nodes as the bus's board holds them (assembly/nodes.ts), and their open sessions.
  const nodes = {
    list: () => gateway.nodes.list(),
    openSessions: async (scope: 'company' | 'agent', key: string) => (await gateway.nodes.openSessions({ scope, key })).total,
  }
  await fastify.register(adminRoutes, {
    credentials,
    consoleSessions,
    noteUsed: adminCallers.noteUsed,
    store,
    changes,
    revoker,
    nodes,
    cursorSecret,
    webhookDestinations: gateway.webhookDestinations,
    limits,
    prefix: '/admin/v1',
  })
  if (consoleSessions !== undefined) await fastify.register(consoleRoutes, { credentials, sessions: consoleSessions })
}

/**
 * How long one plugin may take to start before Fastify gives up on it (its default: 10 s).
 * The gateway's start (migrations, the store's and the bus's first connections, each with
 * its own 2 s connect timeout) took longer than 10 s on a loaded 2-core CI machine with
 * OpenTelemetry's instrumentations loading beside it, and the node exited. A start that
 * makes no progress at all still fails, later.
 */
export const PLUGIN_START_TIMEOUT_MS = 60_000

/**
 * Fastify's own options for this service: body limit, strict validation, our logger, and
 * SPEC bodies even for what fails before routing (a malformed URL).
 */
export function fastifyOptions(config: Config, logger: Logger): FastifyServerOptions {
  return {
    loggerInstance: logger,
    pluginTimeout: PLUGIN_START_TIMEOUT_MS,
    bodyLimit: config.bodyLimitBytes,
    // Ids longer than find-my-way's default of 100 are "not found" (404), not a 414.
    routerOptions: { maxParamLength: 2048 },
    frameworkErrors: answerFrameworkError as FastifyServerOptions['frameworkErrors'],
    // What Node's parser refuses (headers over MAX_HEADER_SIZE, say): the verify path is still denied with a 401.
    clientErrorHandler: clientErrorAnswerer(refusedVerifyCall) as FastifyServerOptions['clientErrorHandler'],
    // Per-request logs would cost more than the verification itself; /metrics counts requests.
    logController: new LogController({ disableRequestLogging: true }),
    // Nor is a child logger built for every request: errors log their request id themselves.
    childLoggerFactory: (logger) => logger,
    return503OnClosing: true,
    ...connectionOptions(config.limits),
    ajv: {
      // A number where a string is expected is a 400, not silently "123".
      customOptions: { coerceTypes: false, removeAdditional: false, allErrors: false },
    },
  }
}

/** What fails before routing (a malformed URL) still gets a SPEC body. */
function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  // A proxy's verify call is decided by its token, whatever its path looks like.
  const verifyCall = answerUnroutedVerifyCall(request.server.gateway.verifyToken, request, reply)
  if (verifyCall !== undefined) return verifyCall
  const apiError = toApiError(error)
  return reply.code(apiError.statusCode).send(body(apiError))
}

export interface BuiltApp {
  app: FastifyInstance
  gateway: Gateway
}

/**
 * A ready app over a new node; closing the app closes the node, as a failed start does.
 * `routes`: more routes of the caller's own, registered before the app is ready (the chaos
 * test's hosts add their test-only routes this way).
 */
export async function buildApp(config: Config, options: GatewayOptions, routes?: FastifyPluginAsync): Promise<BuiltApp> {
  const internals = await nodeInternals({ use: config.nodeInternals, log: options.logger })
  const fastify = Fastify(fastifyOptions(config, options.logger)).withTypeProvider<TypeBoxTypeProvider>()
  hardenServer(fastify, config.limits, internals)
  try {
    await fastify.register(gatewayPlugin, { config, ...options })
    await fastify.register(app, { internals })
    if (routes) await fastify.register(routes)
    await fastify.ready()
  } catch (error) {
    await fastify.close().catch(() => {})
    throw error
  }
  return { app: fastify, gateway: fastify.gateway }
}

/**
 * chat_auth_http_requests_total by route, method and status. Each route gets a hook of its
 * own that knows its path (`request.routeOptions` builds a new object on every read), and
 * bumps a series bound once per method and status; requests no route matched are counted
 * by one hook for all.
 */
function countRequests(fastify: FastifyInstance, gateway: Gateway): void {
  const series = gateway.metrics.seriesCounter('chat_auth_http_requests_total', 'HTTP requests by route, method and status', ['route', 'method', 'status'])
  const counterOf = (route: string) => {
    const byMethod = new Map<string, Map<number, () => void>>()
    return (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
      const { method } = request
      const { statusCode } = reply
      let byStatus = byMethod.get(method)
      if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()))
      let count = byStatus.get(statusCode)
      if (count === undefined) byStatus.set(statusCode, (count = series({ route, method, status: statusCode })))
      count()
      done()
    }
  }
  fastify.addHook('onRoute', (route) => {
    const own = route.onResponse === undefined ? [] : Array.isArray(route.onResponse) ? route.onResponse : [route.onResponse]
    // a new array: the HEAD route Fastify derives from a GET copies its options before this runs
    route.onResponse = [...own, counterOf(route.url)] as typeof route.onResponse
  })
  const unmatched = counterOf('unmatched')
  fastify.addHook('onResponse', (request, reply, done) => (request.is404 ? unmatched(request, reply, done) : done()))
}
