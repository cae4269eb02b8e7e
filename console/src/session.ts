/**
 * The console's session (SPEC §10.3), through the client's console calls: a token is exchanged
 * once for an HttpOnly cookie; the page keeps only the answer's role, name and anti-CSRF
 * token, in memory.
 */
import { ChatAuthClient, ChatAuthError, type ConsoleSession, type Role } from '../../src/client/index.js'

export type { Role }
export type Session = ConsoleSession

/** The same-origin client: the browser sends the session cookie; `csrf` goes on writes. */
export const sameOrigin = (csrf?: string) => new ChatAuthClient({ baseUrl: location.origin, credentials: 'same-origin', retries: 1, ...(csrf === undefined ? {} : { csrf }) })

const noSession = (error: unknown) => error instanceof ChatAuthError && error.statusCode === 401

/** The live session, or null when there is none (401). */
export async function currentSession(): Promise<Session | null> {
  try {
    return await sameOrigin().console.session()
  } catch (error) {
    if (noSession(error)) return null
    throw error
  }
}

/** Rejects with the gateway's refusal (401 a wrong token; 429 too many guesses). */
export const signIn = (token: string): Promise<Session> => sameOrigin().console.signIn(token)

/** Ends the session on every node; a session already gone is signed out too. */
export async function signOut(csrf: string): Promise<void> {
  try {
    await sameOrigin(csrf).console.signOut()
  } catch (error) {
    if (!noSession(error)) throw error
  }
}

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 }

/** Whether `role` may do what `needed` may (the API decides; this only hides what it would refuse). */
export const may = (role: Role, needed: Role): boolean => RANK[role] >= RANK[needed]
