import net from 'node:net'
import type { Server } from 'node:http'
import type { FastifyInstance } from 'fastify'
import type { Logger } from 'pino'
import type { Config } from './config.js'
import { buildApp } from './app.js'
import { demoBanner, seedDemo } from './demo.js'
import type { Gateway } from './gateway.js'

export interface RunningServer {
  app: FastifyInstance
  gateway: Gateway
  url: string
  close(): Promise<void>
}

const SHUTDOWN_GRACE_MS = 10_000
/** how long open keep-alive connections get to carry their last request before they are closed */
const DRAIN_MS = 2000

/**
 * Builds the app, prepares a first run (demo data, generated admin token), listens, and
 * shuts down gracefully on SIGTERM/SIGINT: stop accepting, finish in-flight requests,
 * close the stores.
 */
export async function startServer(config: Config, logger: Logger, print: (text: string) => void = (t) => process.stdout.write(t + '\n')): Promise<RunningServer> {
  const { app, gateway } = await buildApp(config, { logger })
  try {
    const demo = config.seedDemo && !config.databaseUrl ? await seedDemo(gateway.store) : undefined
    await app.listen({ port: config.port, host: config.host })
    const address = app.server.address()
    const port = typeof address === 'object' && address ? address.port : config.port
    const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`
    logger.info({ url, store: gateway.db.kind, bus: config.redis ? `redis (${config.redis.kind})` : 'in-process', kid: gateway.keyring.signingKid, kids: gateway.keyring.kids }, 'chat-auth listening')
    // Shown once, by design, in one piece; never through the logger (which would redact it).
    const firstRun = [
      gateway.generatedAdminToken && `No ADMIN_TOKEN was set: generated one (shown once, kept in the store as a hash):\n  ADMIN_TOKEN=${gateway.generatedAdminToken}`,
      demo && demoBanner(demo, url).trim(),
    ].filter(Boolean)
    if (firstRun.length > 0) print(`\n${firstRun.join('\n\n')}\n`)
    return { app, gateway, url, close: () => app.close() }
  } catch (error) {
    await app.close().catch(() => {})
    throw error
  }
}

/** `flush`: what must still leave before the process exits, once the server closed (the traces' last batch). */
export function closeOnSignals(server: RunningServer, logger: Logger, flush: () => Promise<void> = async () => {}): void {
  let closing = false
  const shutdown = (signal: string) => {
    if (closing) return
    closing = true
    logger.info({ signal }, 'shutting down')
    const forced = setTimeout(() => {
      logger.error('graceful shutdown timed out')
      process.exit(1)
    }, SHUTDOWN_GRACE_MS).unref()
    const closeThenFlush = async () => {
      await drainThenClose(server)
      // A trace export that fails is not a failed shutdown.
      await flush().catch((error) => logger.warn({ err: error }, 'flushing traces failed'))
    }
    closeThenFlush().then(
      () => {
        clearTimeout(forced)
        process.exit(0)
      },
      (error) => {
        logger.error({ err: error }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.once('SIGTERM', () => shutdown('SIGTERM'))
  process.once('SIGINT', () => shutdown('SIGINT'))
}

/**
 * Stops without resetting anyone: no new connections; every open connection carries its
 * next request and is closed by the answer itself (`Connection: close`); what is still idle
 * after DRAIN_MS, in-flight requests and the stores are then closed by `app.close()`.
 *
 * http.Server#close would destroy idle keep-alive connections at once, and a request a
 * client sent on one at that instant would be lost in a reset: the listener is closed on
 * its own first (net.Server#close keeps open connections), so idle ones are closed only
 * once clients that keep sending have been told.
 */
export async function drainThenClose(server: RunningServer, drainMs = DRAIN_MS): Promise<void> {
  const http: Server = server.app.server
  http.prependListener('request', (_request, response) => response.setHeader('connection', 'close'))
  net.Server.prototype.close.call(http)
  const deadline = Date.now() + drainMs
  while (Date.now() < deadline && (await openConnections(http)) > 0) await new Promise((resolve) => setTimeout(resolve, 20))
  await server.close()
}

function openConnections(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.getConnections((error, count) => resolve(error ? 0 : count)))
}
