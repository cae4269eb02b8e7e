// A node as `chat-auth serve` starts it, but with one coherence defence switched off: the
// chaos test's mutant runs, which must find violations, or its checker proves nothing.
// This entry point is the only way to switch a defence off — no configuration variable
// can. It runs the built service (npm run build first).
//   node unsafe-node-host.mjs no-epoch-flush          no flush on a new epoch, and a new
//                                                     subscription trusted without catching up
//   node unsafe-node-host.mjs catch-up-skips-window   the catch-up after a reconnect reads from
//                                                     where it reconnected, not from its horizon
//   node unsafe-node-host.mjs catch-up-ignores-revoked-tokens
//                                                     the catch-up leaves out the tokens revoked
//                                                     (revoke-token) while the channel was lost
//   node unsafe-node-host.mjs horizon-ignores-outbox   while subscribed, the catch-up horizon moves to the
//                                                     snapshot's xmin, ignoring unconfirmed publishes (the
//                                                     outbox) and without the PING round trip
//   node unsafe-node-host.mjs no-primary-check        (Sentinel) the primary is not checked with the sentinels
import { loadConfig } from '../../../dist/src/config.js'
import { createLogger } from '../../../dist/src/logger.js'
import { buildApp } from '../../../dist/src/app.js'
import { closeOnSignals } from '../../../dist/src/server.js'

const MUTANTS = {
  'no-epoch-flush': { redisBus: { unsafeNoEpochFlush: true } },
  'catch-up-skips-window': { redisBus: { unsafeCatchUpSkipsWindow: true } },
  'catch-up-ignores-revoked-tokens': { unsafeCatchUpIgnoresRevokedTokens: true },
  'no-primary-check': { redisBus: { unsafeNoPrimaryCheck: true } },
  // advancing every lease (not every 5 s) so that a fault falls between an advance and a publish in flight
  'horizon-ignores-outbox': { redisBus: { unsafeHorizonIgnoresOutbox: true, horizonAdvanceMs: 0 } },
}
const unsafe = MUTANTS[process.argv[2]]
if (!unsafe) throw new Error(`unsafe-node-host: name a mutant: ${Object.keys(MUTANTS).join(', ')}`)

const config = loadConfig()
const logger = createLogger(config)
const { app, gateway } = await buildApp(config, { logger, ...unsafe })
await app.listen({ port: config.port, host: config.host })
closeOnSignals({ app, gateway, url: `http://${config.host}:${config.port}`, close: () => app.close() }, logger)
