import { Session } from './session.js'

export type IndexKind = 'user' | 'company' | 'agent' | 'token'

/**
 * A row's sessions: most users and most jtis have one, held as itself (a Set of one costs
 * more than the rest of the session's share of the index); a Set from the second on.
 */
type Members = Session | Set<Session>

/** The id of the session's row of this kind (its jti may be missing). */
export const rowIdOf = (kind: IndexKind, session: Session): string | undefined =>
  kind === 'user' ? session.userId : kind === 'company' ? session.companyId : kind === 'agent' ? session.agentId : session.jti

const membersOf = (members: Members): Session[] => (members instanceof Session ? [members] : [...members])

const KINDS: readonly IndexKind[] = ['user', 'company', 'agent', 'token']

/**
 * Open sessions by user id, company id, agent id and jti: a change names one row, and finds
 * that row's sessions in one lookup, whatever the number of sessions open on the node. A
 * session holds the ids (strings shared with the cached rows), not entries of its own.
 */
export function createSessionIndex() {
  const maps: Record<IndexKind, Map<string, Members>> = { user: new Map(), company: new Map(), agent: new Map(), token: new Map() }

  function join(kind: IndexKind, session: Session): void {
    const id = rowIdOf(kind, session)
    if (id === undefined) return
    const map = maps[kind]
    const members = map.get(id)
    if (members === undefined) map.set(id, session)
    else if (members instanceof Session) map.set(id, new Set([members, session]))
    else members.add(session)
  }

  function leave(kind: IndexKind, session: Session): void {
    const id = rowIdOf(kind, session)
    if (id === undefined) return
    const map = maps[kind]
    const members = map.get(id)
    // an emptied row goes at once: closed sessions leave nothing behind
    if (members === session) map.delete(id)
    else if (members instanceof Set && members.delete(session) && members.size === 1) map.set(id, members.values().next().value!)
  }

  return {
    add(session: Session): void {
      for (const kind of KINDS) join(kind, session)
    },
    remove(session: Session): void {
      for (const kind of KINDS) leave(kind, session)
    },
    /** the open sessions of one row (a copy), or undefined: the common case, no allocation */
    of(kind: IndexKind, id: string): Session[] | undefined {
      const found = maps[kind].get(id)
      return found === undefined ? undefined : membersOf(found)
    },
    /** every open session (each is under exactly one user) */
    *all(): Iterable<Session> {
      for (const members of maps.user.values()) yield* membersOf(members)
    },
    /** entries per index (tests and /metrics: all back to 0 once every session ended) */
    sizes: () => ({ users: maps.user.size, companies: maps.company.size, agents: maps.agent.size, jtis: maps.token.size }),
  }
}
