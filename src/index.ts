/** The library surface: embed the gateway, or verify in-process from a Node chat backend. */
export { loadConfig, ConfigError, type Config } from './config.js'
export { createLogger } from './logger.js'
export { createGateway, type Gateway } from './gateway.js'
export { default as app, buildApp, fastifyOptions } from './app.js'
export { chatAuthPlugin, type ChatAuthPluginOptions } from './plugin.js'
export { createTokenVerifier, bearerToken, type Identity, type Verdict, type VerifyToken } from './auth/verify.js'
export { denials, errors, ApiError, StoreUnavailableError } from './errors.js'
export type { InvalidationBus, Change } from './bus/bus.js'
