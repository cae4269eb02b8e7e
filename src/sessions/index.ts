import { Cohort } from './cohort.js'
import { jtiKey } from './jti.js'
import { Session } from './session.js'

export type IndexKind = 'user' | 'company' | 'agent' | 'token'

/**
 * A user's or a jti's sessions (a jti's key: jti.ts): most users and most jtis have one, held
 * as itself (a Set of one costs more than the rest of the session's share of the index); a Set
 * from the second on.
 */
type Members = Session | Set<Session>

/** Whether the session is one of that row's (a session without a jti is no token's). */
export const isOfRow = (kind: IndexKind, id: string, session: Session): boolean =>
  kind === 'user' ? session.userId === id : kind === 'company' ? session.companyId === id : kind === 'agent' ? session.agentId === id : session.jti === id

const membersOf = (members: Members): Session[] => (members instanceof Session ? [members] : [...members])

/**
 * Open sessions by user id, company id, agent id and jti: a change names one row, and finds
 * that row's sessions in one lookup, whatever the number of sessions open on the node. A
 * session holds the ids (strings shared with the cached rows), not entries of its own: a
 * user and a jti map to their sessions; a company and an agent to their cohorts (cohort.ts),
 * a few per agent at most, each a list through its sessions.
 */
export function createSessionIndex() {
  const users = new Map<string, Members>()
  const jtis = new Map<number | string, Members>()
  const cohortsOf: Record<'company' | 'agent', Map<string, Cohort[]>> = { company: new Map(), agent: new Map() }

  function join<Key>(map: Map<Key, Members>, id: Key, session: Session): void {
    const members = map.get(id)
    if (members === undefined) map.set(id, session)
    else if (members instanceof Session) map.set(id, new Set([members, session]))
    else members.add(session)
  }

  function leave<Key>(map: Map<Key, Members>, id: Key, session: Session): void {
    const members = map.get(id)
    // an emptied row goes at once: closed sessions leave nothing behind
    if (members === session) map.delete(id)
    else if (members instanceof Set && members.delete(session) && members.size === 1) map.set(id, members.values().next().value!)
  }

  function addCohort(map: Map<string, Cohort[]>, id: string, cohort: Cohort): void {
    const cohorts = map.get(id)
    if (cohorts === undefined) map.set(id, [cohort])
    else cohorts.push(cohort)
  }

  function removeCohort(map: Map<string, Cohort[]>, id: string, cohort: Cohort): void {
    const cohorts = map.get(id)!
    if (cohorts.length === 1) map.delete(id)
    else cohorts.splice(cohorts.indexOf(cohort), 1)
  }

  return {
    /** the cohort a session with these facts joins: an open one of its agent's, or a new one */
    cohortFor(companyId: string, agentId: string, agentName: string, companyGeneration: number, agentGeneration: number): Cohort {
      const open = cohortsOf.agent.get(agentId)?.find((cohort) => cohort.holds(companyId, agentId, agentName, companyGeneration, agentGeneration))
      return open ?? new Cohort(companyId, agentId, agentName, companyGeneration, agentGeneration)
    },
    add(session: Session): void {
      join(users, session.userId, session)
      if (session.jtiKey !== undefined) join(jtis, session.jtiKey, session)
      const cohort = session.cohort
      // a cohort is indexed while it has sessions (a new one, or one its last session left)
      if (cohort.head === undefined) {
        addCohort(cohortsOf.company, cohort.companyId, cohort)
        addCohort(cohortsOf.agent, cohort.agentId, cohort)
      }
      cohort.link(session)
    },
    remove(session: Session): void {
      leave(users, session.userId, session)
      if (session.jtiKey !== undefined) leave(jtis, session.jtiKey, session)
      const cohort = session.cohort
      cohort.unlink(session)
      if (cohort.head === undefined) {
        removeCohort(cohortsOf.company, cohort.companyId, cohort)
        removeCohort(cohortsOf.agent, cohort.agentId, cohort)
      }
    },
    /** the open sessions of one row (a copy), or undefined: the common case, no allocation */
    of(kind: IndexKind, id: string): Session[] | undefined {
      if (kind === 'user') {
        const found = users.get(id)
        return found === undefined ? undefined : membersOf(found)
      }
      if (kind === 'token') {
        const found = jtis.get(jtiKey(id))
        if (found === undefined) return undefined
        // the key is the jti's first 32 bits: another jti may share it
        const sessions = membersOf(found).filter((session) => session.jti === id)
        return sessions.length === 0 ? undefined : sessions
      }
      const cohorts = cohortsOf[kind].get(id)
      if (cohorts === undefined) return undefined
      const sessions: Session[] = []
      for (const cohort of cohorts) cohort.collect(sessions)
      return sessions
    },
    /** every open session (each is under exactly one user) */
    *all(): Iterable<Session> {
      for (const members of users.values()) yield* membersOf(members)
    },
    /** entries per index (tests and /metrics: all back to 0 once every session ended) */
    sizes: () => ({ users: users.size, companies: cohortsOf.company.size, agents: cohortsOf.agent.size, jtis: jtis.size }),
  }
}
