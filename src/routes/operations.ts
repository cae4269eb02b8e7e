import type { FastifyInstance } from 'fastify'
import { setTimeout as delay } from 'node:timers/promises'
import type { InvalidationBus } from '../bus/bus.js'
import type { Keyring } from '../jwt/keyring.js'
import { METRICS_CONTENT_TYPE, type Metrics } from '../metrics.js'
import type { Store } from '../store/store.js'

const READINESS_TIMEOUT_MS = 2000

export interface OperationsRoutesOptions {
  store: Pick<Store, 'ping'>
  bus: Pick<InvalidationBus, 'health'>
  metrics: Pick<Metrics, 'render'>
  keyring: Pick<Keyring, 'jwks'>
}

/** SPEC §3.4: liveness, readiness and Prometheus metrics. */
export async function operationsRoutes(fastify: FastifyInstance, { store, bus: channel, metrics, keyring }: OperationsRoutesOptions): Promise<void> {
  fastify.get('/healthz', async () => ({ status: 'ok' }))

  fastify.get('/readyz', async (_request, reply) => {
    const bus = channel.health()
    // A database that does not answer in time is down; the unref'd timer never holds the process.
    const database = await Promise.race([
      store.ping().then(
        () => true,
        () => false,
      ),
      delay(READINESS_TIMEOUT_MS, false, { ref: false }),
    ])
    const ready = database && bus.ready && bus.trusted
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'unavailable',
      database: database ? 'up' : 'down',
      invalidationChannel: bus.ready ? 'subscribed' : 'down',
      cacheTrusted: bus.trusted,
    })
  })

  fastify.get('/metrics', async (_request, reply) =>
    reply.type(METRICS_CONTENT_TYPE).send(await metrics.render()),
  )

  fastify.get('/.well-known/jwks.json', async (_request, reply) =>
    reply.header('cache-control', 'public, max-age=300').send(keyring.jwks()),
  )
}
