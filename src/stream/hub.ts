import type { ServerResponse } from 'node:http'
import type { CommittedEvent, EventsRead } from '../store/store.js'
import { encodeCursor, type Position } from './cursor.js'
import { createReplayer } from './replay.js'

/**
 * The node's event streams (SPEC §8.2): one hub per node, one cursor (a store snapshot) for
 * all its subscribers, and nothing at all while no stream is open.
 *
 * Reads of new events are serialized: each returns the subscribed companies' events
 * committed since the hub's cursor and moves it to the read's own snapshot. One runs on every
 * change the bus delivers (the handler's promise holds the node's acknowledgement until the
 * events are handed to the live streams: the SPEC's timeliness), and one every `pollMs` for
 * events of changes that publish nothing (a new API key) and as a safety net. Such a read
 * costs what committed since the previous one, whatever any stream has yet to replay.
 *
 * A stream joins at a read that began after it arrived (so the hub's cursor is newer than any
 * cursor the client brings) and from then on takes every read's events. A stream that resumes
 * (Last-Event-ID) replays its backlog, up to the cursor it joined at, outside that order: the
 * events reads bring meanwhile wait in the stream's own buffer, bounded, and follow the
 * backlog. So every event is delivered once, in order, and no acknowledgement, write or other
 * company waits for a replay (stream/cursor.ts says why ids alone would not do).
 */
export interface EventHubOptions {
  store: {
    eventsSince(companyIds: string[], after: string, upTo?: string, aboveId?: string, limit?: number): Promise<EventsRead>
    eventSnapshot(): Promise<string>
  }
  cursorSecret(): Promise<Buffer>
  logger: { warn(details: object, message: string): void; info(details: object, message: string): void }
  /** open streams on this node; past it reserve() refuses */
  maxStreams: number
  /** open streams of one company on this node; past it reserve() refuses that company */
  maxStreamsPerCompany: number
  pollMs?: number
  pingMs?: number
  /** bytes a stream may have waiting (in its socket, or behind its replay) before it is dropped */
  maxBufferedBytes?: number
  /** how long a replaying stream may wait for its client to read before it is dropped */
  stallMs?: number
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

/** Why reserve() refused: the node's streams, or the company's share of them, are all open. */
export type Refusal = 'node-full' | 'company-full'

export interface EventHub {
  /** takes a place for a stream of `companyId` (given back when open() fails or the response closes) */
  reserve(companyId: string): Refusal | undefined
  /** with a place reserved: joins the stream (its backlog replays in the background), then live events until the response closes; rejects if the store cannot answer */
  open(subscription: Subscription): Promise<void>
  /** the bus's change handler: undefined (nothing to do) while no stream is open */
  onChange(): Promise<void> | undefined
  /** open streams, those joining included */
  size(): number
  /** streams replaying a backlog */
  replaying(): number
  close(): void
}

const POLL_MS = 1000
const PING_MS = 15_000
const MAX_BUFFERED_BYTES = 1024 * 1024
const STALL_MS = 30_000

interface Member extends Subscription {
  secret: Buffer
  /** gives its place back (once) */
  release(): void
  /** while it replays: the live events that arrived meanwhile, as written text */
  waiting?: string[]
  waitingBytes: number
}

interface Joiner {
  member: Member
  joined(): void
  failed(error: unknown): void
}

/**
 * Node's response corks its socket on a write and uncorks it on the next tick; the events of
 * a change must leave before the node acknowledges it, which happens within this tick.
 */
function sendNow(response: ServerResponse): void {
  const socket = response.socket
  while (socket !== null && socket.writableCorked > 0) socket.uncork()
}

/** The event as the listing gives it (SPEC §7.2). */
const eventBody = (event: CommittedEvent) => ({ id: event.id, type: event.type, at: event.at.toISOString(), actor: event.actor, subject: event.subject, detail: event.detail })

export function createEventHub(options: EventHubOptions): EventHub {
  const { store, logger, maxStreams, maxStreamsPerCompany } = options
  const maxBuffered = options.maxBufferedBytes ?? MAX_BUFFERED_BYTES
  const stallMs = options.stallMs ?? STALL_MS
  const members = new Set<Member>()
  /** places taken, per company: from reserve() until the stream's response closes */
  const places = new Map<string, number>()
  let placesTaken = 0
  let joining: Joiner[] = []
  let cursor: string | undefined
  let closed = false
  let queue: Promise<void> = Promise.resolve()
  let queuedRead: Promise<void> | undefined
  const replayer = createReplayer({ store, logger, stallMs })

  const release = (companyId: string) => {
    const held = places.get(companyId)! - 1
    if (held === 0) places.delete(companyId)
    else places.set(companyId, held)
    placesTaken--
  }

  const drop = (member: Member) => {
    members.delete(member)
    member.release()
    member.response.destroy()
  }

  /** Hands text to the socket; a client that stopped reading is dropped instead of held in memory. */
  const write = (member: Member, text: string) => {
    const { response } = member
    if (response.destroyed || response.writableEnded) return
    if (response.writableLength > maxBuffered) return drop(member)
    response.write(text)
  }

  const eventText = (member: Member, event: CommittedEvent, position: Position) =>
    `id: ${encodeCursor(member.secret, member.companyId, position)}\nevent: ${event.type}\ndata: ${JSON.stringify(eventBody(event))}\n\n`

  const wanted = (member: Member, event: CommittedEvent) => member.companyId === event.companyId && (member.types === undefined || member.types.has(event.type))

  /** A live event: written, or kept behind the member's replay (dropped past the bound: the client resumes from what it got). */
  const send = (member: Member, event: CommittedEvent, position: Position) => {
    if (!wanted(member, event)) return
    const text = eventText(member, event, position)
    if (member.waiting === undefined) return write(member, text)
    member.waiting.push(text)
    member.waitingBytes += text.length
    if (member.waitingBytes > maxBuffered) {
      logger.warn({ companyId: member.companyId }, 'event stream: dropped while replaying its backlog, its live events past the bound (the client resumes)')
      drop(member)
    }
  }

  /** The events committed since the hub's cursor, to every subscriber they belong to; then the streams that arrived before it began join. */
  async function readNew(): Promise<void> {
    const joiners = joining
    joining = []
    try {
      if (members.size === 0 && joiners.length === 0) {
        cursor = undefined
        return
      }
      if (cursor === undefined || members.size === 0) {
        cursor = await store.eventSnapshot()
      } else {
        const companies = [...new Set([...members].map((member) => member.companyId))]
        const read = await store.eventsSince(companies, cursor)
        for (const event of read.events) {
          const position = { base: cursor, upTo: read.snapshot, id: event.id }
          for (const member of members) send(member, event, position)
        }
        if (read.events.length > 0) for (const member of members) sendNow(member.response)
        cursor = read.snapshot
      }
    } catch (error) {
      for (const joiner of joiners) joiner.failed(error)
      throw error
    }
    for (const joiner of joiners) admit(joiner, cursor)
  }

  /** A stream joins at `at`: from now on it takes every read's events; a resumed one first replays what it missed up to `at`. */
  function admit({ member, joined, failed }: Joiner, at: string): void {
    // The node closed while this stream joined: it is refused (503), as a new one would be.
    if (closed) return failed(new Error('the node is closing'))
    joined()
    const { response, resume } = member
    if (response.destroyed) return
    member.start()
    members.add(member)
    response.once('close', () => members.delete(member))
    if (resume === 'reset') write(member, 'event: reset\ndata: {}\n\n')
    else if (resume !== undefined) {
      const stream = {
        get companyId() { return member.companyId },
        response,
        get waiting() { return member.waiting },
        set waiting(texts: string[] | undefined) { member.waiting = texts },
        wanted: (event: CommittedEvent) => wanted(member, event),
        text: (event: CommittedEvent, position: Position) => eventText(member, event, position),
        write: (text: string) => write(member, text),
        drop: () => drop(member),
      }
      void replayer.replay(stream, resume, at)
    }
  }

  /** A read after every change already committed: a change arriving during one waits for the next. */
  function refresh(): Promise<void> {
    if (queuedRead !== undefined) return queuedRead
    const read = queue.then(async () => {
      queuedRead = undefined
      await readNew()
    })
    queue = read.catch(() => {})
    queuedRead = read
    return read
  }

  const pollTimer = setInterval(() => {
    if (members.size > 0) refresh().catch((error: unknown) => logger.warn({ err: error }, 'event stream: could not read new events'))
  }, options.pollMs ?? POLL_MS).unref()
  const pingTimer = setInterval(() => {
    for (const member of members) write(member, ': ping\n\n')
  }, options.pingMs ?? PING_MS).unref()

  return {
    reserve(companyId) {
      if (closed || placesTaken >= maxStreams) return 'node-full'
      const held = places.get(companyId) ?? 0
      if (held >= maxStreamsPerCompany) return 'company-full'
      places.set(companyId, held + 1)
      placesTaken++
      return undefined
    },
    async open(subscription) {
      let placed = true
      const giveBack = () => {
        if (placed) release(subscription.companyId)
        placed = false
      }
      try {
        subscription.response.once('close', giveBack)
        if (subscription.response.destroyed) return giveBack()
        const member: Member = { ...subscription, secret: await options.cursorSecret(), release: giveBack, waitingBytes: 0 }
        const joined = new Promise<void>((resolve, reject) => joining.push({ member, joined: resolve, failed: reject }))
        await Promise.all([joined, refresh()])
      } catch (error) {
        giveBack()
        throw error
      }
    },
    onChange() {
      // A stream joining counts: its start may predate this change's commit.
      if (members.size === 0 && joining.length === 0 && placesTaken === 0) return undefined
      // A failed read is not acknowledged: the writer then waits out this node's lease, as for a node that cannot vouch.
      return refresh().catch((error: unknown) => {
        logger.warn({ err: error }, 'event stream: could not read the events of a change')
        throw error
      })
    },
    size: () => placesTaken,
    replaying: () => replayer.replaying(),
    close() {
      closed = true
      clearInterval(pollTimer)
      clearInterval(pingTimer)
      for (const member of members) member.response.end()
      members.clear()
    },
  }
}
