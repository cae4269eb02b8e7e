/**
 * The console's session (SPEC §10.3): a token is exchanged once for an HttpOnly cookie; the
 * page keeps only the answer's role, name and anti-CSRF token, in memory. These three calls
 * are the console's own (`/console/api/session`), not the admin API, so they use fetch itself.
 */
export type Role = 'viewer' | 'operator' | 'admin'

export interface Session {
  role: Role
  name: string
  /** the anti-CSRF proof every write carries (x-csrf-token); never stored */
  csrf: string
}

const SESSION_URL = '/console/api/session'

/** A refusal of the session API, with the gateway's message when it sent one. */
export class SessionError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

async function refusal(response: Response): Promise<SessionError> {
  const body = (await response.json().catch(() => undefined)) as { message?: unknown } | undefined
  const message = typeof body?.message === 'string' ? body.message : `the gateway answered ${response.status}`
  return new SessionError(response.status, response.status === 429 ? `${message} — too many attempts; wait a minute` : message)
}

/** The live session, or null when there is none (401). */
export async function currentSession(): Promise<Session | null> {
  const response = await fetch(SESSION_URL, { credentials: 'same-origin', headers: { accept: 'application/json' } })
  if (response.status === 401) return null
  if (!response.ok) throw await refusal(response)
  return (await response.json()) as Session
}

export async function signIn(token: string): Promise<Session> {
  const response = await fetch(SESSION_URL, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify({ token }),
  })
  if (!response.ok) throw await refusal(response)
  return (await response.json()) as Session
}

/** Ends the session on every node; a session already gone is signed out too. */
export async function signOut(csrf: string): Promise<void> {
  const response = await fetch(SESSION_URL, { method: 'DELETE', credentials: 'same-origin', headers: { 'x-csrf-token': csrf } })
  if (!response.ok && response.status !== 401) throw await refusal(response)
}

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 }

/** Whether `role` may do what `needed` may (the API decides; this only hides what it would refuse). */
export const may = (role: Role, needed: Role): boolean => RANK[role] >= RANK[needed]
