// A node as `chat-auth serve` starts it, but with the Redis bus's cache flush on a new
// epoch switched off: the chaos test's mutant run, which must find violations, or its
// checker proves nothing. This entry point is the only way to switch that defence off —
// no configuration variable can. It runs the built service (npm run build first).
import { loadConfig } from '../../../dist/src/config.js'
import { createLogger } from '../../../dist/src/logger.js'
import { buildApp } from '../../../dist/src/app.js'
import { closeOnSignals } from '../../../dist/src/server.js'

const config = loadConfig()
const logger = createLogger(config)
const { app, gateway } = await buildApp(config, { logger, redisBus: { unsafeNoEpochFlush: true } })
await app.listen({ port: config.port, host: config.host })
closeOnSignals({ app, gateway, url: `http://${config.host}:${config.port}`, close: () => app.close() }, logger)
