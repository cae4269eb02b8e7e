import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import fastifyStatic from '@fastify/static'
import { errors } from '../../errors.js'
import { body } from '../../http/error-handler.js'

/** `dist/console/` at the package root, found from both `src/` and `dist/src/`: what `npm run build` makes of `console/`. */
export const CONSOLE_ASSETS_DIR = fileURLToPath(new URL(import.meta.url.includes('/dist/') ? '../../../console/' : '../../../dist/console/', import.meta.url))

export const CONSOLE_PATH = '/console/'

/** What a node without the built console answers at /console/: no script, no style (the CSP allows none inline). */
const NOT_BUILT_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>chat-auth console</title></head>
<body>
<h1>The console was not built</h1>
<p>This node serves the operators' console from <code>dist/console/</code>, which is missing. Build it with <code>npm run build</code> (from a checkout) or install a package that includes it. The admin API under <code>/admin/v1</code> works without it.</p>
</body>
</html>
`

/**
 * SPEC §10.3: the console's single page and its assets, built into `assetsDir`. Every path
 * below /console/ that is no file and looks like a screen (no dot in its last segment) is
 * the page itself, so that every screen has a URL an operator can paste; a missing asset or
 * API path is a 404 with the error body.
 */
export async function consolePages(fastify: FastifyInstance, { assetsDir = CONSOLE_ASSETS_DIR }: { assetsDir?: string }): Promise<void> {
  // Registered with the prefix /console: its paths here are below it.
  const built = existsSync(join(assetsDir, 'index.html'))
  if (!built) {
    fastify.get('/*', { schema: { hide: true } }, async (request, reply) => (isScreen(request) ? notBuilt(reply) : notFound(request, reply)))
    return
  }
  await fastify.register(fastifyStatic, { root: assetsDir, prefix: '/', index: 'index.html', schemaHide: true })
  fastify.setNotFoundHandler(async (request, reply) => (isScreen(request) ? reply.type('text/html; charset=utf-8').sendFile('index.html') : notFound(request, reply)))
}

/** A GET of a screen's URL (not an API path, not a file name). */
function isScreen(request: FastifyRequest): boolean {
  if (request.method !== 'GET' && request.method !== 'HEAD') return false
  const path = request.url.split('?')[0]!
  return path.startsWith(CONSOLE_PATH) && !path.startsWith(`${CONSOLE_PATH}api/`) && !(path.split('/').at(-1) ?? '').includes('.')
}

function notBuilt(reply: FastifyReply) {
  return reply.type('text/html; charset=utf-8').send(NOT_BUILT_PAGE)
}

function notFound(request: FastifyRequest, reply: FastifyReply) {
  return reply.code(404).send(body(errors.routeNotFound(request.method, request.url)))
}
