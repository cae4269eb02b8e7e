import Fastify, { type FastifyServerOptions } from 'fastify'
import fp from 'fastify-plugin'
import type { Logger } from 'pino'
import type { Config } from './config.js'
import type { InvalidationBus } from './bus/bus.js'
import type { States } from './cache/states.js'
import type { Db } from './store/db.js'
import type { Store } from './store/store.js'
import type { Keyring } from './jwt/keyring.js'
import { Metrics } from './metrics.js'
import { createHousekeeping, type Housekeeping } from './housekeeping.js'
import type { OnClose } from './assembly/lifecycle.js'
import { openStore } from './assembly/store.js'
import { loadKeys } from './assembly/keys.js'
import { openBus, type NodeParts } from './assembly/bus.js'
import { openCaches } from './assembly/caches.js'
import { openServices, type Services } from './assembly/services.js'
import { openClock } from './assembly/clock.js'
import { openSessions } from './assembly/sessions.js'
import { openEventStreams, type EventStreams } from './assembly/event-hub.js'
import { openChangePipeline, type ChangeSteps } from './change-pipeline.js'
import { openWebhooks } from './assembly/webhooks.js'
import type { WebhookWorker } from './webhooks/worker.js'
import type { Destinations } from './webhooks/destinations.js'
import type { Sessions } from './sessions/sessions.js'
import type { ClockWatch } from './clock/offset.js'
import { revocationGraceSeconds } from './clock/grace.js'

export type { NodeParts }

/**
 * Everything one node needs, built once: store, caches, bus, keys, and the services made of
 * them. The HTTP app and the in-process Fastify plugin hand each part only the services it
 * uses (see app.ts); nothing below this module knows the Gateway.
 */
export interface Gateway extends Services {
  readonly config: Config
  readonly db: Db
  /** every statement, including the publishing writes: outside tests, only `changes` calls those */
  readonly store: Store
  readonly bus: InvalidationBus
  readonly states: States
  readonly keyring: Keyring
  readonly metrics: Metrics
  /** prunes expired revocations, old events and the change log (see housekeeping.ts) */
  readonly housekeeping: Housekeeping
  /** false while the cache warm-up (WARM_UP_USERS) runs: /readyz answers 503 until it is done */
  warmedUp(): boolean
  /** this node's clock against PostgreSQL's: /readyz answers 503 while it is past MAX_CLOCK_SKEW */
  readonly clock: ClockWatch
  /** the admin token, when this boot generated it (so it must be shown once) */
  readonly generatedAdminToken: string | undefined
  adminTokenMatches(presented: string): boolean
  /** whether a SHA-256 of a token is the admin token's (a console session opened with it) */
  adminTokenHashMatches(hash: Buffer): boolean
  /** the sessions opened on this node (SPEC §8.1): `chatAuthPlugin`'s `openChatSession` */
  readonly sessions: Sessions
  /** the node's event streams (SPEC §8.2): `GET /rest/v1/auth/events` */
  readonly eventStreams: EventStreams
  /** sends the company's events to their webhooks (SPEC §9.3), in the background */
  readonly webhooks: WebhookWorker
  /** where webhooks may be sent (SPEC §9.3): what the admin API checks a new one against */
  readonly webhookDestinations: Destinations
}

export interface GatewayOptions {
  logger: Logger
  /** an already open database that the caller owns (tests share one per run) */
  db?: Db
  /** the invalidation bus; by default in-process, or Redis when configured */
  bus?: InvalidationBus
  /** parts a test wraps or replaces (the chaos test's mutants); never from the configuration */
  parts?: NodeParts
}

declare module 'fastify' {
  interface FastifyInstance {
    /** the node this instance serves (see gateway.ts) */
    gateway: Gateway
  }
}

/**
 * The node as a Fastify plugin: each part is opened in order and says at once what to close
 * (assembly/), so a start that fails half-way and a shutdown close the same parts, in
 * reverse order, through Fastify's onClose. `app.ts` adds the routes; `plugin.ts` uses it as
 * it is, inside another app.
 */
export const gatewayPlugin = fp<GatewayOptions & { config: Config }>(
  async (fastify, { config, logger, ...options }) => {
    const onClose: OnClose = (close) => fastify.addHook('onClose', async () => void (await close()))
    const metrics = new Metrics()
    const opened = await openStore(onClose, config, { logger, metrics, db: options.db })
    const { db, claim } = opened
    const store = options.parts?.store ? options.parts.store(opened.store) : opened.store
    const clock = await openClock(onClose, config, { store, logger, metrics })
    const keys = await loadKeys(config, store)
    const bus = await openBus(onClose, config, { logger, metrics, store, jwtKeys: keys.jwtKeys, claim, bus: options.bus, parts: options.parts })
    const { states, warmedUp } = openCaches(onClose, config, { store, bus, metrics, logger, parts: options.parts })
    const services = openServices(onClose, config, { store, states, bus, keyring: keys.keyring, metrics, logger })
    const sessions = openSessions(onClose, config, { store, bus, verifyToken: services.verifyToken, metrics, logger })
    const eventStreams = openEventStreams(onClose, config, { store, logger, wrap: options.parts?.eventHub })
    const { worker: webhooks, destinations: webhookDestinations } = openWebhooks(onClose, config, { store, metrics, logger })
    // Every part is open: from here on each committed change takes its one path through them.
    const steps: ChangeSteps = { caches: states, sessions, streams: eventStreams.hub, webhooks }
    openChangePipeline(bus, options.parts?.changeSteps ? options.parts.changeSteps(steps) : steps)
    const housekeeping = createHousekeeping({ store, logger, revocationGraceSeconds: revocationGraceSeconds(config), eventRetentionDays: config.eventRetentionDays })
    onClose(() => housekeeping.stop())
    fastify.decorate('gateway', {
      ...services,
      config,
      db,
      store,
      bus,
      states,
      keyring: keys.keyring,
      metrics,
      housekeeping,
      sessions,
      eventStreams,
      webhooks,
      webhookDestinations,
      warmedUp,
      clock,
      generatedAdminToken: keys.generatedAdminToken,
      adminTokenMatches: keys.adminTokenMatches,
      adminTokenHashMatches: keys.adminTokenHashMatches,
    } satisfies Gateway)
  },
  { name: 'chat-auth-gateway', fastify: '5.x' },
)

/** A node without HTTP (a library's own, or a test's): the same assembly, closed by `close()`. */
export async function createGateway(config: Config, options: GatewayOptions): Promise<Gateway & { close(): Promise<void> }> {
  const serverOptions: FastifyServerOptions = { loggerInstance: options.logger }
  const node = Fastify(serverOptions)
  try {
    await node.register(gatewayPlugin, { config, ...options })
    await node.ready()
  } catch (error) {
    await node.close().catch(() => {})
    throw error
  }
  return { ...node.gateway, close: () => node.close() }
}
