import type { FastifyInstance } from 'fastify'
import type { Gateway } from '../gateway.js'

const READINESS_TIMEOUT_MS = 2000

/** SPEC §3.4: liveness, readiness and Prometheus metrics. */
export async function operationsRoutes(fastify: FastifyInstance, { gateway }: { gateway: Gateway }): Promise<void> {
  fastify.get('/healthz', async () => ({ status: 'ok' }))

  fastify.get('/readyz', async (_request, reply) => {
    const bus = gateway.bus.health()
    const database = await withTimeout(gateway.store.ping(), READINESS_TIMEOUT_MS).then(
      () => true,
      () => false,
    )
    const ready = database && bus.ready && bus.trusted
    return reply.code(ready ? 200 : 503).send({
      status: ready ? 'ready' : 'unavailable',
      database: database ? 'up' : 'down',
      invalidationChannel: bus.ready ? 'subscribed' : 'down',
      cacheTrusted: bus.trusted,
    })
  })

  fastify.get('/metrics', async (_request, reply) =>
    reply.type('text/plain; version=0.0.4; charset=utf-8').send(gateway.metrics.render()),
  )

  fastify.get('/.well-known/jwks.json', async (_request, reply) =>
    reply.header('cache-control', 'public, max-age=300').send(gateway.keyring.jwks()),
  )
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('timeout')), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}
