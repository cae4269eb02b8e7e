import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { FastifyRequest } from 'fastify'
import type { ConsoleSessions } from '../../auth/console-sessions.js'
import { csrfMatches } from '../../auth/console-sessions.js'
import type { Caller } from '../../domain.js'
import { errors } from '../../errors.js'
import { CONSOLE_COOKIE, consoleCookie, CSRF_HEADER, headerOf } from '../../http/admin-callers.js'
import type { CredentialGuard } from '../../http/credential-guard.js'
import { errorResponses, Text } from '../../http/schemas.js'

export interface ConsoleSessionRoutesOptions {
  /** the token's caller, with the failed-credential limit (SPEC §7.3): guessing at sign-in is limited as on the admin API */
  credentials: Pick<CredentialGuard, 'adminToken'>
  sessions: ConsoleSessions
}

const Session = Type.Object({
  role: Type.Union([Type.Literal('viewer'), Type.Literal('operator'), Type.Literal('admin')]),
  name: Type.String({ description: "the operator's name; `admin` for ADMIN_TOKEN" }),
  csrf: Type.String({ description: `the session's anti-CSRF token: every write from the console sends it as \`${CSRF_HEADER}\`. Keep it in memory only` }),
})

const sessionBody = (caller: Caller, csrf: string) => ({ role: caller.role, name: caller.actor.kind === 'operator' ? caller.actor.name : 'admin', csrf })

/**
 * SPEC §10.3: the cookie's attributes. HttpOnly (the page's script never reads it),
 * SameSite=Strict (no other site's page sends it), Path=/ (the page calls /admin/v1), and
 * Secure when the request came over HTTPS, directly or through a proxy that TRUST_PROXY
 * names (Fastify's `protocol` reads its X-Forwarded-Proto only then). No Max-Age: the store
 * decides when a session ends, and the browser forgets the cookie when it closes.
 */
function cookieOptions(request: FastifyRequest) {
  return { path: '/', httpOnly: true, sameSite: 'strict' as const, secure: request.protocol === 'https' }
}

/** The console's sign-in, the page's own session, and sign-out (same origin, cookie-based). */
export const consoleSessionRoutes: FastifyPluginAsyncTypebox<ConsoleSessionRoutesOptions> = async (fastify, { credentials, sessions }) => {
  // What the page reads of its session is never cached, by a browser or by a proxy.
  fastify.addHook('onSend', async (_request, reply) => void reply.header('cache-control', 'no-store'))

  async function liveSession(request: FastifyRequest) {
    const id = consoleCookie(fastify, request)
    const session = id === undefined ? undefined : await sessions.find(id)
    if (id === undefined || session === undefined) throw errors.invalidAdminToken()
    return { id, ...session }
  }

  fastify.post(
    '/console/api/session',
    {
      schema: {
        body: Type.Object({ token: Text(4096) }, { additionalProperties: false }),
        response: { 200: Session, ...errorResponses(400, 401, 429) },
      },
    },
    async (request, reply) => {
      const { token } = request.body
      // The token is exchanged here, once: the page never holds it again.
      const caller = await credentials.adminToken(request, token)
      const { id, csrf } = await sessions.open(caller, token)
      reply.setCookie(CONSOLE_COOKIE, id, cookieOptions(request))
      return sessionBody(caller, csrf)
    },
  )

  fastify.get('/console/api/session', { schema: { response: { 200: Session, ...errorResponses(401) } } }, async (request) => {
    const session = await liveSession(request)
    return sessionBody(session.caller, session.csrf)
  })

  fastify.delete('/console/api/session', { schema: { response: { 204: Type.Null({ description: 'Signed out: the session ended on every node' }), ...errorResponses(401, 403) } } }, async (request, reply) => {
    const session = await liveSession(request)
    if (!csrfMatches(session.csrf, headerOf(request, CSRF_HEADER))) throw errors.csrf()
    await sessions.end(session.id)
    reply.clearCookie(CONSOLE_COOKIE, cookieOptions(request))
    return reply.code(204).send(null)
  })
}
