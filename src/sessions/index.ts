import { Session, type Bucket } from './session.js'

export type IndexKind = 'user' | 'company' | 'agent' | 'token'

function join(bucket: Bucket, session: Session): void {
  const members = bucket.members
  if (members === undefined) bucket.members = session
  else if (members instanceof Session) bucket.members = new Set([members, session])
  else members.add(session)
}

function part(bucket: Bucket, session: Session): void {
  const members = bucket.members
  if (members === session) bucket.members = undefined
  else if (members instanceof Set) {
    members.delete(session)
    if (members.size === 1) bucket.members = members.values().next().value
  }
}

const membersOf = (bucket: Bucket): Session[] => (bucket.members === undefined ? [] : bucket.members instanceof Session ? [bucket.members] : [...bucket.members])

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
    if (found === undefined) map.set(id, (found = { id, members: undefined }))
    return found
  }
  const leave = (kind: IndexKind, bucket: Bucket | undefined, session: Session) => {
    if (bucket === undefined) return
    part(bucket, session)
    // an empty bucket goes at once: closed sessions leave nothing behind
    if (bucket.members === undefined && maps[kind].get(bucket.id) === bucket) maps[kind].delete(bucket.id)
  }

  return {
    bucket,
    add(session: Session): void {
      join(session.user, session)
      join(session.company, session)
      join(session.agent, session)
      if (session.jti) join(session.jti, session)
    },
    remove(session: Session): void {
      leave('user', session.user, session)
      leave('company', session.company, session)
      leave('agent', session.agent, session)
      leave('token', session.jti, session)
    },
    /** the open sessions of one row (a copy), or undefined: the common case, no allocation */
    of(kind: IndexKind, id: string): Session[] | undefined {
      const found = maps[kind].get(id)
      return found === undefined ? undefined : membersOf(found)
    },
    /** every open session (each is under exactly one user) */
    *all(): Iterable<Session> {
      for (const bucket of maps.user.values()) yield* membersOf(bucket)
    },
    /** entries per index (tests and /metrics: all back to 0 once every session ended) */
    sizes: () => ({ users: maps.user.size, companies: maps.company.size, agents: maps.agent.size, jtis: maps.token.size }),
  }
}
