/**
 * A node exactly as `chat-auth serve` starts it (loadConfig → createLogger → startServer →
 * closeOnSignals), plus one thing for the bench: started with --expose-gc and an IPC
 * channel, it answers {type: 'memory'} with its memory after a full GC, so the kit can
 * tell the live heap from the GC headroom in the node's RSS; and {type: 'sessions', tokens}
 * opens a session (SPEC §8.1, as a chat server on the plugin would) for each token and holds
 * it, answering {type: 'sessions', open, refused}: verify-hot with that many sessions open.
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

const held: Array<{ close(): void }> = []
process.on('message', (message: { type?: string; tokens?: string[] }) => {
  if (message?.type === 'sessions') return void openSessions(message.tokens ?? [])
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

async function openSessions(tokens: string[]): Promise<void> {
  let refused = 0
  for (const token of tokens) {
    const session = await server.gateway.sessions.open(token).catch(() => undefined)
    if (session?.ok) {
      // read, as a caller that listens to it does (Node makes the signal when first read)
      void session.signal
      held.push(session)
    } else refused++
  }
  process.send?.({ type: 'sessions', open: held.length, refused })
}
