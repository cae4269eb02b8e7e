import { randomBytes, timingSafeEqual } from 'node:crypto'
import { ADMIN_CALLER, type Caller } from '../domain.js'
import type { SessionLifetime, Store } from '../store/store.js'
import { hashSecret } from './api-keys.js'
import { operatorCaller } from './operators.js'

/** SPEC §10.3: a console session lives at most this long, however busy. */
export const CONSOLE_SESSION_MAX_AGE_SECONDS = 12 * 3600

/** 32 random bytes in base64url: a session id, as its cookie holds it. */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/

/**
 * SPEC §10.3: the console's sign-ins. A session is a row in the store (only the SHA-256 of
 * its id), read on every request with its operator: a sign-out, an operator's revocation, an
 * idle or absolute timeout is seen on every node from its commit on, by the database's clock.
 */
export interface ConsoleSessions {
  /** A new session for a caller who just presented `token` (an operator's, or ADMIN_TOKEN). */
  open(caller: Caller, token: string): Promise<{ id: string; csrf: string }>
  /** The caller and anti-CSRF token of a live session (seen now); undefined: none. */
  find(id: string): Promise<{ caller: Caller; csrf: string; operatorId: string | undefined } | undefined>
  /** Sign-out; whether a live session ended. */
  end(id: string): Promise<boolean>
}

export interface ConsoleSessionsOptions {
  store: Pick<Store, 'createConsoleSession' | 'liveConsoleSession' | 'endConsoleSession'>
  /** whether an ADMIN_TOKEN session's token hash is this node's ADMIN_TOKEN (it may have been rotated) */
  adminTokenHashMatches(hash: Buffer): boolean
  /** CONSOLE_SESSION_IDLE, in seconds */
  idleSeconds: number
}

export function createConsoleSessions({ store, adminTokenHashMatches, idleSeconds }: ConsoleSessionsOptions): ConsoleSessions {
  const lifetime: SessionLifetime = { idleSeconds, maxAgeSeconds: CONSOLE_SESSION_MAX_AGE_SECONDS }
  return {
    async open(caller, token) {
      const id = randomBytes(32).toString('base64url')
      const csrf = randomBytes(32).toString('base64url')
      const operatorId = caller.actor.kind === 'operator' ? caller.actor.id : null
      await store.createConsoleSession({ idHash: hashSecret(id), operatorId, adminTokenHash: operatorId === null ? hashSecret(token) : null, csrf })
      return { id, csrf }
    },
    async find(id) {
      if (!SESSION_ID.test(id)) return undefined
      const session = await store.liveConsoleSession(hashSecret(id), lifetime)
      if (session === undefined) return undefined
      if (session.operator !== undefined) return { caller: operatorCaller(session.operator), csrf: session.csrf, operatorId: session.operator.id }
      if (session.adminTokenHash === undefined || !adminTokenHashMatches(session.adminTokenHash)) return undefined
      return { caller: ADMIN_CALLER, csrf: session.csrf, operatorId: undefined }
    },
    async end(id) {
      return SESSION_ID.test(id) && (await store.endConsoleSession(hashSecret(id)))
    },
  }
}

/** Whether a presented anti-CSRF token is the session's (constant time in the token). */
export function csrfMatches(expected: string, presented: string | undefined): boolean {
  if (presented === undefined) return false
  const a = hashSecret(expected)
  const b = hashSecret(presented)
  return timingSafeEqual(a, b)
}
