import { describe, invalidArgument } from './input.js'
import type { Transport } from './transport.js'
import type { CallOptions } from './calls.js'
import type { ConsoleSession } from './types.js'

/**
 * The console's session (same origin; in a browser, with `credentials: 'same-origin'`). The
 * token is sent once, to sign in; the session is a cookie the page's script cannot read.
 */
export class ConsoleCalls {
  constructor(
    private readonly transport: Transport,
    private readonly csrf: string | undefined,
  ) {}

  /** POST /console/api/session: the session's role, name and anti-CSRF token (keep it in memory only). Not retried. */
  async signIn(token: string, options: CallOptions = {}): Promise<ConsoleSession> {
    if (typeof token !== 'string') throw invalidArgument(`the token must be a string, not ${describe(token)}`)
    return this.transport.send({ method: 'POST', path: '/console/api/session', body: { token }, idempotent: false, signal: options.signal })
  }

  /** GET /console/api/session: the live session (401 INVALID_ADMIN_TOKEN: none). */
  async session(options: CallOptions = {}): Promise<ConsoleSession> {
    return this.transport.send({ method: 'GET', path: '/console/api/session', idempotent: true, signal: options.signal })
  }

  /** DELETE /console/api/session: the session ends on every node (needs the client option `csrf`). */
  async signOut(options: CallOptions = {}): Promise<void> {
    if (this.csrf === undefined) throw new TypeError('signOut needs the client option csrf')
    await this.transport.send({ method: 'DELETE', path: '/console/api/session', headers: { 'x-csrf-token': this.csrf }, idempotent: true, signal: options.signal, emptyAnswer: true })
  }
}
