import type { FastifyInstance, FastifyRequest } from 'fastify'
import fastifyCookie from '@fastify/cookie'
import type { Caller } from '../domain.js'
import { errors } from '../errors.js'
import { csrfMatches, type ConsoleSessions } from '../auth/console-sessions.js'
import type { CredentialGuard } from './credential-guard.js'

/** SPEC §10.3: the console session's cookie, and the header a write from the console proves itself with. */
export const CONSOLE_COOKIE = 'chat_auth_console'
export const CSRF_HEADER = 'x-csrf-token'

/** Methods that change nothing: a console session needs no anti-CSRF token for them. */
const SAFE_METHODS = new Set(['GET', 'HEAD'])

const callers = new WeakMap<FastifyRequest, Caller>()

/** The caller `resolveAdminCallers` found for this request (only on the routes it guards). */
export function callerOf(request: FastifyRequest): Caller {
  const caller = callers.get(request)
  if (caller === undefined) throw new Error(`no caller resolved for ${request.method} ${request.url}`)
  return caller
}

export interface AdminCallersOptions {
  /** the bearer token's caller, with the failed-credential limit (SPEC §7.3) */
  credentials: Pick<CredentialGuard, 'admin'>
  /** the console's sessions; undefined with CONSOLE=false: the admin API then takes bearer tokens only */
  consoleSessions: Pick<ConsoleSessions, 'find'> | undefined
  /** an operator's session was used (its `lastUsedAt`) */
  noteUsed(operatorId: string): void
}

/**
 * SPEC §10.1, §10.3: every request of this context gets its caller once, before anything
 * else: `Authorization: Bearer` (ADMIN_TOKEN or an operator's token) when the request has
 * one; otherwise the console session its cookie names, where a write must also carry the
 * session's anti-CSRF token (403 `CSRF`). Neither: 401 `INVALID_ADMIN_TOKEN`.
 *
 * A session cookie that names no live session is not counted as a failed credential: its id
 * is 256 random bits (no guess can find one), and a page left open past its session's end
 * would otherwise lock its operator out of signing in again from that address.
 */
export async function resolveAdminCallers(fastify: FastifyInstance, { credentials, consoleSessions, noteUsed }: AdminCallersOptions): Promise<void> {
  if (consoleSessions !== undefined) await fastify.register(fastifyCookie, { hook: false })
  fastify.addHook('onRequest', async (request) => {
    const sessionId = consoleSessions === undefined || request.headers.authorization !== undefined ? undefined : consoleCookie(fastify, request)
    if (sessionId === undefined) {
      callers.set(request, await credentials.admin(request))
      return
    }
    const session = await consoleSessions!.find(sessionId)
    if (session === undefined) throw errors.invalidAdminToken()
    if (!SAFE_METHODS.has(request.method) && !csrfMatches(session.csrf, headerOf(request, CSRF_HEADER))) throw errors.csrf()
    if (session.operatorId !== undefined) noteUsed(session.operatorId)
    callers.set(request, session.caller)
  })
}

/** The console cookie's value, if the request carries one. */
export function consoleCookie(fastify: FastifyInstance, request: FastifyRequest): string | undefined {
  const header = request.headers.cookie
  if (header === undefined || !header.includes(CONSOLE_COOKIE)) return undefined
  const value = fastify.parseCookie(header)[CONSOLE_COOKIE]
  return value === undefined || value === '' ? undefined : value
}

/** A header sent once; sent twice (an array), it is as good as absent. */
export function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  return typeof value === 'string' ? value : undefined
}
