import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'
import { setTimeout as delay } from 'node:timers/promises'
import type { InvalidationBus } from '../bus/bus.js'
import type { Keyring } from '../jwt/keyring.js'
import { METRICS_CONTENT_TYPE, type Metrics } from '../metrics.js'
import type { Store } from '../store/store.js'
import type { ClockState } from '../clock/offset.js'
import { entityTag, ifNoneMatchHits } from '../http/conditional.js'
import { JSON_CONTENT_TYPE } from '../json-text.js'

const READINESS_TIMEOUT_MS = 2000

const Health = Type.Object({ status: Type.Literal('ok') })
const Readiness = Type.Object({
  status: Type.Union([Type.Literal('ready'), Type.Literal('unavailable')]),
  database: Type.Union([Type.Literal('up'), Type.Literal('down')]),
  invalidationChannel: Type.Union([Type.Literal('subscribed'), Type.Literal('down')]),
  cacheTrusted: Type.Boolean(),
  /** false while the start-up cache warm-up (WARM_UP_USERS) runs */
  cacheWarm: Type.Boolean(),
  /** false until the node's first load of the live token revocations is in */
  revocationsLoaded: Type.Boolean(),
  /** this node's clock against PostgreSQL's: `skewed` past MAX_CLOCK_SKEW, `unknown` before a first reading */
  clock: Type.Union([Type.Literal('ok'), Type.Literal('skewed'), Type.Literal('unknown')]),
  /** with Redis: the server the node follows (a Sentinel's primary, the master of a Cluster's bus slot) and whether its subscription is live */
  redis: Type.Optional(Type.Object({ follows: Type.Union([Type.String(), Type.Null()]), subscribed: Type.Boolean() })),
})
// Each key as RFC 7517 writes it; which members a key has depends on its algorithm.
const Jwks = Type.Object({ keys: Type.Array(Type.Object({ kty: Type.String(), kid: Type.String(), alg: Type.String(), use: Type.String() }, { additionalProperties: true })) })
const NotModified = { description: 'The If-None-Match header names the current key set (its ETag, or *): no body', type: 'null' }
const MetricsText = { description: 'Prometheus text format', content: { 'text/plain': { schema: Type.String() } } }

export interface OperationsRoutesOptions {
  store: Pick<Store, 'ping'>
  bus: Pick<InvalidationBus, 'health'>
  metrics: Pick<Metrics, 'render'>
  keyring: Pick<Keyring, 'jwks'>
  /** false while the start-up cache warm-up runs */
  warmedUp: () => boolean
  /** false until the first load of the revoked tokens is in (cache/revoked-tokens.ts) */
  revocationsLoaded: () => boolean
  /** this node's clock against PostgreSQL's (clock/offset.ts) */
  clock: () => ClockState
  /** how long a client may keep the key set before asking again (JWKS_MAX_AGE) */
  jwksMaxAgeSeconds: number
}

/** SPEC §3.4: liveness, readiness and Prometheus metrics; §9.4: the public keys, cached and revalidated. */
export async function operationsRoutes(fastify: FastifyInstance, { store, bus: channel, metrics, keyring, warmedUp, revocationsLoaded, clock, jwksMaxAgeSeconds }: OperationsRoutesOptions): Promise<void> {
  fastify.get('/healthz', { schema: { response: { 200: Health } } }, async () => ({ status: 'ok' as const }))

  const notReady = {
    ...Readiness,
    description:
      "The database does not answer in time, the node cannot vouch for its cache, its cache warm-up is still running, its revoked tokens are still loading, or its clock is off PostgreSQL's by more than MAX_CLOCK_SKEW (or not read yet)",
  }
  fastify.get('/readyz', { schema: { response: { 200: Readiness, 503: notReady } } }, async (_request, reply) => {
    const bus = channel.health()
    // A database that does not answer in time is down; the unref'd timer never holds the process.
    const database = await Promise.race([
      store.ping().then(
        () => true,
        () => false,
      ),
      delay(READINESS_TIMEOUT_MS, false, { ref: false }),
    ])
    const warm = warmedUp()
    // Until the revocations are in, each jti is a store read: the node is right, not fast.
    const revocations = revocationsLoaded()
    // Revocations are kept only for clocks within MAX_CLOCK_SKEW (clock/grace.ts): a node
    // past it may accept a token the others refuse, and says so here.
    const clockState = clock()
    const ready = database && bus.ready && bus.trusted && warm && revocations && clockState === 'ok'
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'unavailable',
      database: database ? 'up' : 'down',
      invalidationChannel: bus.ready ? 'subscribed' : 'down',
      cacheTrusted: bus.trusted,
      cacheWarm: warm,
      revocationsLoaded: revocations,
      clock: clockState,
      ...(bus.redis === undefined ? {} : { redis: { follows: bus.redis.follows ?? null, subscribed: bus.redis.subscribed } }),
    })
  })

  fastify.get('/metrics', { schema: { response: { 200: MetricsText } } }, async (_request, reply) =>
    reply.type(METRICS_CONTENT_TYPE).send(await metrics.render()),
  )

  // Cached by clients and proxies for max-age, then revalidated: the ETag is of the bytes
  // sent, so it changes exactly when the key set does (a rotation's phase), on every node alike.
  const cacheControl = `public, max-age=${jwksMaxAgeSeconds}`
  fastify.get('/.well-known/jwks.json', { schema: { response: { 200: Jwks, 304: NotModified } } }, async (request, reply) => {
    const body = JSON.stringify(keyring.jwks())
    const etag = entityTag(body)
    reply.header('cache-control', cacheControl).header('etag', etag)
    if (ifNoneMatchHits(request.headers['if-none-match'], etag)) return reply.code(304).send()
    return reply.type(JSON_CONTENT_TYPE).send(body)
  })
}
