import t from 'tap'
import { tracingRequested } from '../../src/config.js'

// Which environments start OpenTelemetry (src/telemetry/, loaded by `chat-auth serve`); any other loads none of it.
t.test('an OTLP endpoint or a named trace exporter starts tracing; OTEL_SDK_DISABLED or the exporter none never does', async (t) => {
  const cases: Array<[Record<string, string>, boolean, string]> = [
    [{}, false, 'no variable'],
    [{ OTEL_SERVICE_NAME: 'chat-auth-eu' }, false, 'a service name alone'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, false, 'an empty endpoint'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, true, 'the endpoint'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, true, 'the traces endpoint'],
    [{ OTEL_TRACES_EXPORTER: 'console' }, true, 'an exporter named'],
    [{ OTEL_TRACES_EXPORTER: 'otlp, console' }, true, 'a list of exporters'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }, false, 'the exporter none'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'otlp,None' }, false, 'none in a list, any case'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }, false, 'the SDK disabled'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'false' }, true, 'the SDK not disabled'],
  ]
  for (const [env, expected, name] of cases) t.equal(tracingRequested(env), expected, name)
})
