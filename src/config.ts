import { parseClientConfig, parseConfig, type ClientConfig } from './config/load.js'
import type { Config } from './config/types.js'
import type { Env } from './config/variables.js'

/**
 * The configuration, read from the environment once at boot. The only module that reads
 * `process.env`; what each variable is and how it is checked is declared in
 * config/variables.ts, the rules that tie variables together are in config/load.ts.
 */
export function loadConfig(env: Env = process.env): Config {
  return parseConfig(env)
}

/** Where the CLI's admin calls go, and the admin token they send. */
export function loadClientConfig(env: Env = process.env): ClientConfig {
  return parseClientConfig(env)
}

/**
 * Whether this node exports traces (docs/operations.md, "OpenTelemetry"): an OTLP endpoint, or a
 * trace exporter named, in the standard OpenTelemetry variables, and the SDK not disabled.
 * The rest of those variables the OpenTelemetry SDK reads itself, and only then: without
 * them, nothing of OpenTelemetry is loaded.
 */
export function tracingRequested(env: Env = process.env): boolean {
  const set = (name: string) => (env[name] ?? '').trim() !== ''
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((name) => name.trim().toLowerCase()).filter(Boolean)
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true' || exporters.includes('none')) return false
  return set('OTEL_EXPORTER_OTLP_ENDPOINT') || set('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') || exporters.length > 0
}

export type { ClientConfig } from './config/load.js'
export { parseDuration } from './config/kinds.js'
export { CLIENT_VARIABLES, CONFIG_VARIABLES, VARIABLES, type VariableName } from './config/variables.js'
export type { Variable } from './config/kinds.js'
export * from './config/types.js'
