import type { Bucket, Session } from './session.js'

export type IndexKind = 'user' | 'company' | 'agent' | 'token'

/**
 * Open sessions by user id, company id, agent id and jti: a change names one row, and finds
 * that row's sessions in one lookup, whatever the number of sessions open on the node.
 */
export function createSessionIndex() {
  const maps: Record<IndexKind, Map<string, Bucket>> = { user: new Map(), company: new Map(), agent: new Map(), token: new Map() }

  /** The bucket of `id`, made when it has none: its id string is shared by all its sessions. */
  const bucket = (kind: IndexKind, id: string): Bucket => {
    const map = maps[kind]
    let found = map.get(id)
    if (found === undefined) map.set(id, (found = { id, sessions: new Set() }))
    return found
  }
  const leave = (kind: IndexKind, bucket: Bucket | undefined, session: Session) => {
    if (bucket === undefined) return
    bucket.sessions.delete(session)
    // an empty bucket goes at once: closed sessions leave nothing behind
    if (bucket.sessions.size === 0 && maps[kind].get(bucket.id) === bucket) maps[kind].delete(bucket.id)
  }

  return {
    bucket,
    add(session: Session): void {
      session.user.sessions.add(session)
      session.company.sessions.add(session)
      session.agent.sessions.add(session)
      session.jti?.sessions.add(session)
    },
    remove(session: Session): void {
      leave('user', session.user, session)
      leave('company', session.company, session)
      leave('agent', session.agent, session)
      leave('token', session.jti, session)
    },
    /** the open sessions of one row, or undefined: the common case, no allocation */
    of: (kind: IndexKind, id: string): Set<Session> | undefined => maps[kind].get(id)?.sessions,
    /** every open session (each is under exactly one user) */
    *all(): Iterable<Session> {
      for (const { sessions } of maps.user.values()) yield* sessions
    },
    /** entries per index (tests and /metrics: all back to 0 once every session ended) */
    sizes: () => ({ users: maps.user.size, companies: maps.company.size, agents: maps.agent.size, jtis: maps.token.size }),
  }
}
