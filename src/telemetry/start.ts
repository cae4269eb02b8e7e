import { register } from 'node:module'
import { FastifyOtelInstrumentation } from '@fastify/otel'
import { IORedisInstrumentation } from '@opentelemetry/instrumentation-ioredis'
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg'
import { NodeSDK, resources } from '@opentelemetry/sdk-node'
import { subscribeTracePoints } from './trace-points.js'

/**
 * OpenTelemetry traces for `chat-auth serve`, started before anything of the server is
 * imported, and only when `tracingRequested()` (config.ts) says so: the CLI imports this
 * module dynamically, so a node without OTEL_* variables loads none of it.
 *
 * The SDK reads the standard variables itself (endpoint, protocol, headers, exporter,
 * sampler, batch delays, resource). What we choose: traces only (the metrics are
 * Prometheus's, on /metrics), a service name `chat-auth` unless OTEL_SERVICE_NAME or
 * OTEL_RESOURCE_ATTRIBUTES names one, and these spans: the request (@fastify/otel), its
 * PostgreSQL queries and Redis commands, and the wait for the other nodes' acknowledgements
 * (trace-points.ts). Queries and commands outside a request (heartbeats, catch-up reads,
 * housekeeping) make no span: they would bury the requests.
 */
export interface Telemetry {
  /** exports what is still buffered; call before the process exits */
  shutdown(): Promise<void>
}

export async function startTracing(): Promise<Telemetry> {
  // pg and ioredis are CommonJS imported from our ES modules: only a loader hook sees those
  // imports. Only they are intercepted; every other module loads as it would.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, { data: { include: ['pg', 'ioredis'] } })
  const sdk = new NodeSDK({
    resource: resources.defaultResource().merge(resources.resourceFromAttributes({ 'service.name': 'chat-auth' })),
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new FastifyOtelInstrumentation({
        registerOnInitialization: true,
        // One span per request, its queries and commands right under it: a span per Fastify
        // hook and per handler more would be paid on every request, the verify path's too.
        instrumentHooks: false,
        instrumentHandler: false,
        requestHook: (span, request) => {
          // The HTTP semantic conventions' name for a server span: method and route, never the raw URL.
          span.updateName(`${request.method} ${request.routeOptions.url ?? ''}`.trimEnd())
          // The path alone: a query string is the client's, and may hold what must not leave (a token put there by mistake).
          span.setAttribute('url.path', request.url.split('?', 1)[0]!)
        },
      }),
      new PgInstrumentation({ requireParentSpan: true }),
      // The command's name only: arguments are row ids, message payloads and script arguments.
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  })
  sdk.start()
  const unsubscribe = subscribeTracePoints()
  return {
    async shutdown() {
      unsubscribe()
      await sdk.shutdown()
    },
  }
}
