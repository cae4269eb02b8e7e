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

export type { ClientConfig } from './config/load.js'
export { parseDuration } from './config/kinds.js'
export { CLIENT_VARIABLES, CONFIG_VARIABLES, VARIABLES, type VariableName } from './config/variables.js'
export type { Variable } from './config/kinds.js'
export * from './config/types.js'
