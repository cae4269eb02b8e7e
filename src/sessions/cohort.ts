import type { Session } from './session.js'

/**
 * The open sessions of one agent within one company that were opened at the same agent name
 * and the same company and agent generations: usually every session of that agent, since a
 * generation that moves ends the sessions below it. What they share is kept here once, not
 * in each session, and they are a doubly linked list through their own `prev` and `next`
 * fields: a session belongs to its company's and its agent's index by belonging to its
 * cohort, two fields of its own where an entry in a company Set and an agent Set cost it
 * about 52 bytes (bench/RESULTS.md, issue 20). Joining and leaving take constant time, and
 * a company's or agent's change walks exactly its sessions.
 */
export class Cohort {
  /** the most recently joined session, undefined once the last one left */
  head: Session | undefined = undefined

  constructor(
    readonly companyId: string,
    readonly agentId: string,
    readonly agentName: string,
    readonly companyGeneration: number,
    readonly agentGeneration: number,
  ) {}

  /** whether a session with these facts belongs here */
  holds(companyId: string, agentId: string, agentName: string, companyGeneration: number, agentGeneration: number): boolean {
    return (
      this.companyId === companyId &&
      this.agentId === agentId &&
      this.agentName === agentName &&
      this.companyGeneration === companyGeneration &&
      this.agentGeneration === agentGeneration
    )
  }

  /** adds a session at the head (it must be in no list) */
  link(session: Session): void {
    session.prev = undefined
    session.next = this.head
    if (this.head !== undefined) this.head.prev = session
    this.head = session
  }

  /** takes a session out, joining its neighbours to each other */
  unlink(session: Session): void {
    const { prev, next } = session
    if (prev === undefined) this.head = next
    else prev.next = next
    if (next !== undefined) next.prev = prev
    session.prev = undefined
    session.next = undefined
  }

  /** its sessions, into `into` */
  collect(into: Session[]): void {
    for (let session = this.head; session !== undefined; session = session.next) into.push(session)
  }
}
