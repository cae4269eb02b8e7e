// A node as `chat-auth serve` starts it, but with one coherence defence taken out by a mutant
// (mutants.mjs): the chaos test's mutant runs, which must find violations, or its checker
// proves nothing. It runs the built service (npm run build first).
//   node mutant-node-host.mjs <mutant>
// /metrics gains chat_auth_chaos_mutant_calls_total{mutant}: how often the mutant acted.
import { loadConfig } from '../../../dist/src/config.js'
import { createLogger } from '../../../dist/src/logger.js'
import { buildApp } from '../../../dist/src/app.js'
import { closeOnSignals } from '../../../dist/src/server.js'
import { createMutant } from './mutants.mjs'

const name = process.argv[2]
const config = loadConfig()
const mutant = createMutant(name, config)
const logger = createLogger(config)
const { app, gateway } = await buildApp(config, { logger, parts: mutant.parts })
gateway.metrics.collect('chat_auth_chaos_mutant_calls_total', 'Times the chaos mutant acted (chaos tests only)', 'counter', () => [{ labels: { mutant: name }, value: mutant.calls() }], ['mutant'])
await app.listen({ port: config.port, host: config.host })
closeOnSignals({ app, gateway, url: `http://${config.host}:${config.port}`, close: () => app.close() }, logger)
