import type { ServerResponse } from 'node:http'
import type { CommittedEvent, EventsRead } from '../store/store.js'
import { encodeCursor, type Position } from './cursor.js'
import { eventsAfter } from './backlog.js'

/**
 * The node's event streams (SPEC §8.2): one hub per node, one cursor (a store snapshot) for
 * all its subscribers, and nothing at all while no stream is open.
 *
 * Reads are serialized: each returns the subscribed companies' events committed since the
 * hub's cursor and moves it to the read's own snapshot. One runs on every change the bus
 * delivers (the handler's promise holds the node's acknowledgement until the events are
 * written to the sockets: the SPEC's timeliness), and one every `pollMs` for events of
 * changes that publish nothing (a new API key) and as a safety net.
 *
 * A subscriber joins inside that order: a read first (so the hub's cursor is newer than any
 * cursor the client brings), then its backlog from its cursor up to the hub's cursor, then it
 * takes the hub's reads. Each event is thus delivered once, whatever order the transactions
 * committed in (stream/cursor.ts).
 */
export interface EventHubOptions {
  store: {
    eventsSince(companyIds: string[], after: string, upTo?: string, aboveId?: string, limit?: number): Promise<EventsRead>
    eventSnapshot(): Promise<string>
  }
  cursorSecret(): Promise<Buffer>
  logger: { warn(details: object, message: string): void }
  /** open streams on this node; past it open() refuses */
  maxStreams: number
  pollMs?: number
  pingMs?: number
  /** bytes a stream may have waiting in its socket before it is dropped */
  maxBufferedBytes?: number
}

export interface Subscription {
  companyId: string
  /** undefined: every type */
  types: ReadonlySet<string> | undefined
  /** the client's cursor: a position, 'reset' (not one of this company's), or undefined (from now) */
  resume: Position | 'reset' | undefined
  response: ServerResponse
  /** writes the stream's headers: called once its starting point is fixed, so what commits after the client sees them reaches it */
  start(): void
}

interface Member extends Subscription {
  secret: Buffer
}

export interface EventHub {
  /** takes a place for a stream, or false when the node has MAX_EVENT_STREAMS open */
  reserve(): boolean
  /** with a place reserved (and given back here): writes the backlog, then live events, until the response closes; rejects if the store cannot answer */
  open(subscription: Subscription): Promise<void>
  /** the bus's change handler: undefined (nothing to do) while no stream is open */
  onChange(): Promise<void> | undefined
  size(): number
  close(): void
}

const POLL_MS = 1000
const PING_MS = 15_000
const MAX_BUFFERED_BYTES = 1024 * 1024
/** events per read of a resuming stream's backlog */
const BACKLOG_PAGE = 500

/** The event as the listing gives it (SPEC §7.2). */
const eventBody = (event: CommittedEvent) => ({ id: event.id, type: event.type, at: event.at.toISOString(), actor: event.actor, subject: event.subject, detail: event.detail })

export function createEventHub(options: EventHubOptions): EventHub {
  const { store, logger, maxStreams } = options
  const maxBuffered = options.maxBufferedBytes ?? MAX_BUFFERED_BYTES
  const members = new Set<Member>()
  let reserved = 0
  let cursor: string | undefined
  let closed = false
  let queue: Promise<void> = Promise.resolve()
  let queuedRead: Promise<void> | undefined

  const serialize = (job: () => Promise<void>): Promise<void> => {
    const next = queue.then(job)
    queue = next.catch(() => {})
    return next
  }

  const drop = (member: Member) => {
    members.delete(member)
    member.response.destroy()
  }

  /** Hands text to the socket; a client that stopped reading is dropped instead of held in memory. */
  const write = (member: Member, text: string) => {
    const { response } = member
    if (response.destroyed || response.writableEnded) return
    if (response.writableLength > maxBuffered) return drop(member)
    response.write(text)
  }

  const send = (member: Member, event: CommittedEvent, position: Position) => {
    if (member.companyId !== event.companyId || (member.types !== undefined && !member.types.has(event.type))) return
    write(member, `id: ${encodeCursor(member.secret, member.companyId, position)}\nevent: ${event.type}\ndata: ${JSON.stringify(eventBody(event))}\n\n`)
  }

  /** The events committed since the hub's cursor, to every subscriber they belong to. */
  async function readNew(): Promise<void> {
    if (members.size === 0 && reserved === 0) {
      cursor = undefined
      return
    }
    if (cursor === undefined) {
      cursor = await store.eventSnapshot()
      return
    }
    if (members.size === 0) {
      cursor = await store.eventSnapshot()
      return
    }
    const companies = [...new Set([...members].map((member) => member.companyId))]
    const read = await store.eventsSince(companies, cursor)
    for (const event of read.events) {
      const position = { base: cursor, upTo: read.snapshot, id: event.id }
      for (const member of members) send(member, event, position)
    }
    cursor = read.snapshot
  }

  /** A read after every change already committed: a change arriving during one waits for the next. */
  function refresh(): Promise<void> {
    if (queuedRead !== undefined) return queuedRead
    const read = serialize(async () => {
      queuedRead = undefined
      await readNew()
    })
    queuedRead = read
    return read
  }

  /**
   * The events after the client's cursor up to the hub's, a page at a time, or reset when they
   * cannot all be had. A client that cannot take them as fast is dropped like any slow reader
   * (write()), and resumes from the last event it got: memory stays a page and a socket buffer.
   */
  async function backlog(member: Member, resume: Position, upTo: string): Promise<void> {
    let from = resume
    for (;;) {
      const found = await eventsAfter(store.eventsSince, member.companyId, from, upTo, BACKLOG_PAGE)
      if (found.pruned) return write(member, 'event: reset\ndata: {}\n\n')
      for (const { event, position } of found.events) send(member, event, position)
      const last = found.events.at(-1)
      if (found.complete || last === undefined || member.response.destroyed) return
      from = last.position
    }
  }

  const pollTimer = setInterval(() => {
    if (members.size > 0) refresh().catch((error: unknown) => logger.warn({ err: error }, 'event stream: could not read new events'))
  }, options.pollMs ?? POLL_MS).unref()
  const pingTimer = setInterval(() => {
    for (const member of members) write(member, ': ping\n\n')
  }, options.pingMs ?? PING_MS).unref()

  return {
    reserve() {
      if (closed || members.size + reserved >= maxStreams) return false
      reserved++
      return true
    },
    async open(subscription) {
      try {
        const member: Member = { ...subscription, secret: await options.cursorSecret() }
        await serialize(async () => {
          await readNew()
          // The node closed while this stream joined: it is refused (503), as a new one would be.
          if (closed) throw new Error('the node is closing')
          if (subscription.response.destroyed) return
          subscription.start()
          if (subscription.resume === 'reset') write(member, 'event: reset\ndata: {}\n\n')
          else if (subscription.resume !== undefined) await backlog(member, subscription.resume, cursor!)
          members.add(member)
          subscription.response.once('close', () => members.delete(member))
        })
      } finally {
        reserved--
      }
    },
    onChange() {
      // A stream joining counts: its start may predate this change's commit.
      if (members.size === 0 && reserved === 0) return undefined
      // A failed read is not acknowledged: the writer then waits out this node's lease, as for a node that cannot vouch.
      return refresh().catch((error: unknown) => {
        logger.warn({ err: error }, 'event stream: could not read the events of a change')
        throw error
      })
    },
    size: () => members.size + reserved,
    close() {
      closed = true
      clearInterval(pollTimer)
      clearInterval(pingTimer)
      for (const member of members) member.response.end()
      members.clear()
    },
  }
}
