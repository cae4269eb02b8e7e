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
    logger.info({ url, store: gateway.db.kind, bus: config.redisUrl ? 'redis' : 'in-process', kid: gateway.keyring.signingKid }, 'chat-auth listening')
    // Shown on the terminal, once, by design; never through the logger.
    if (gateway.generatedAdminToken) {
      print(`\nNo ADMIN_TOKEN was set: generated one (shown once, kept in the store as a hash):\n  ADMIN_TOKEN=${gateway.generatedAdminToken}\n`)
    }
    if (demo) print(demoBanner(demo, url))
    return { app, gateway, url, close: () => app.close() }
  } catch (error) {
    await app.close().catch(() => {})
    throw error
  }
}

export function closeOnSignals(server: RunningServer, logger: Logger): void {
  let closing = false
  const shutdown = (signal: string) => {
    if (closing) return
    closing = true
    logger.info({ signal }, 'shutting down')
    const forced = setTimeout(() => {
      logger.error('graceful shutdown timed out')
      process.exit(1)
    }, SHUTDOWN_GRACE_MS).unref()
    server.close().then(
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
