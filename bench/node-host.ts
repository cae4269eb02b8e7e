/**
 * A node exactly as `chat-auth serve` starts it (loadConfig → createLogger → startServer →
 * closeOnSignals), plus one thing for the bench: started with --expose-gc and an IPC
 * channel, it answers {type: 'memory'} with its memory after a full GC, so the kit can
 * tell the live heap from the GC headroom in the node's RSS.
 */
import { loadConfig } from '../src/config.js'
import { createLogger } from '../src/logger.js'
import { closeOnSignals, startServer } from '../src/server.js'

const config = loadConfig()
const logger = createLogger(config)
const server = await startServer(config, logger)
closeOnSignals(server, logger)

// The kit's IPC channel closes when the kit exits, however it exits: shut down with it.
process.on('disconnect', () => {
  server.close().finally(() => process.exit(0))
})

process.on('message', (message: { type?: string }) => {
  if (message?.type !== 'memory') return
  const before = process.memoryUsage()
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc) for (let i = 0; i < 3; i++) gc()
  const after = process.memoryUsage()
  const caches = server.gateway.states.caches
  process.send?.({
    type: 'memory',
    gc: gc !== undefined,
    before,
    after,
    cached: { users: caches.users.size, agents: caches.agents.size, apiKeys: caches.apiKeys.size },
  })
})
