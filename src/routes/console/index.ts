import type { FastifyInstance } from 'fastify'
import fastifyCookie from '@fastify/cookie'
import fastifyHelmet from '@fastify/helmet'
import { consoleSessionRoutes, type ConsoleSessionRoutesOptions } from './session.js'
import { CONSOLE_PATH, consolePages } from './pages.js'

export interface ConsoleRoutesOptions extends ConsoleSessionRoutesOptions {
  /** where the built page is (default: `dist/console/` of the package) */
  assetsDir?: string
}

/**
 * SPEC §10.3: the console (its page, its assets, its session API), in a context of its own:
 * its security headers and cookies are not added to any other route. The
 * Content-Security-Policy allows only the console's own origin, for everything, and no
 * framing; helmet's other headers come with it (HSTS, nosniff, no referrer, …).
 */
export async function consoleRoutes(fastify: FastifyInstance, options: ConsoleRoutesOptions): Promise<void> {
  await fastify.register(fastifyHelmet, {
    contentSecurityPolicy: {
      useDefaults: false,
      directives: {
        defaultSrc: ["'self'"],
        frameAncestors: ["'none'"],
        // helmet's defaults that narrow, never widen, what default-src allows
        baseUri: ["'self'"],
        formAction: ["'self'"],
        objectSrc: ["'none'"],
        scriptSrcAttr: ["'none'"],
      },
    },
    // the same as frame-ancestors 'none', for browsers that only know this header
    frameguard: { action: 'deny' },
  })
  // 'onRequest', not false: @fastify/cookie 11.1.0 writes the cookies setCookie queued only
  // from the onSend hook it adds with a request hook (false leaves sign-in without Set-Cookie)
  await fastify.register(fastifyCookie, { hook: 'onRequest' })
  await fastify.register(consoleSessionRoutes, options)
  // The page's relative asset paths resolve below /console/, not beside it.
  fastify.get('/console', { schema: { hide: true } }, async (_request, reply) => reply.redirect(CONSOLE_PATH, 308))
  await fastify.register(consolePages, { assetsDir: options.assetsDir, prefix: '/console' })
}
