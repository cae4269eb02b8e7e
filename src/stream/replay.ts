import { once } from 'node:events'
import type { ServerResponse } from 'node:http'
import type { CommittedEvent, EventsRead } from '../store/store.js'
import { eventsAfter } from './backlog.js'
import type { Position } from './cursor.js'
import { createFairGate } from './fair-gate.js'

/**
 * A resumed stream's backlog (SPEC §8.2), replayed outside the reads every change waits for
 * (hub.ts): the events after the client's cursor up to where the stream joined, a page at a
 * time, written as the client reads them; then what arrived meanwhile, and the stream is live.
 * Pages are read through one fair gate per node, so that many replays neither take the
 * store from the writes nor make one company's wait behind another's. Memory stays a page, a
 * socket buffer and the stream's bounded wait.
 */
export interface ReplayOptions {
  store: { eventsSince(companyIds: string[], after: string, upTo?: string, aboveId?: string, limit?: number): Promise<EventsRead> }
  logger: { warn(details: object, message: string): void; info(details: object, message: string): void }
  /** how long a replaying stream may wait for its client to read before it is dropped */
  stallMs: number
}

/** What the replay needs of one stream of the hub. */
export interface Replaying {
  companyId: string
  response: ServerResponse
  /** live events that arrived during the replay, as written text (undefined once live) */
  waiting?: string[] | undefined
  wanted(event: CommittedEvent): boolean
  text(event: CommittedEvent, position: Position): string
  /** written as a live event is (bounded, or the stream dropped) */
  write(text: string): void
  drop(): void
}

export interface Replayer {
  replay(stream: Replaying, resume: Position, upTo: string): Promise<void>
  /** streams replaying now */
  replaying(): number
}

/** events per read of a backlog */
const PAGE = 500
/** backlog reads at once on a node, whatever the number of streams replaying: the store's other connections (and cores) stay for the writes */
const READS_AT_ONCE = 1

export function createReplayer(options: ReplayOptions): Replayer {
  const { store, logger, stallMs } = options
  const reads = createFairGate(READS_AT_ONCE)
  let replays = 0

  /** Resolves once the client read what waits in its socket (or the stream ended): false when it did not within stallMs. */
  async function readBy(response: ServerResponse): Promise<boolean> {
    if (!response.writableNeedDrain || response.destroyed) return true
    const done = new AbortController()
    const settled = (event: string) => once(response, event, { signal: done.signal }).then(() => true, () => false)
    let timer: NodeJS.Timeout | undefined
    const stalled = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), stallMs)))
    const read = await Promise.race([settled('drain'), settled('close'), stalled])
    clearTimeout(timer)
    // the listeners of the events that did not come go with it
    done.abort()
    return read
  }

  async function replay(stream: Replaying, resume: Position, upTo: string): Promise<void> {
    const { companyId, response } = stream
    stream.waiting = []
    replays++
    const started = Date.now()
    let replayed = 0
    try {
      for (let from = resume; ; ) {
        const found = await reads.run(companyId, () => eventsAfter(store.eventsSince, companyId, from, upTo, PAGE))
        if (response.destroyed || response.writableEnded) return
        if (found.pruned) {
          stream.write('event: reset\ndata: {}\n\n')
          break
        }
        // Not write(): a page may exceed the socket's bound; the wait below is this stream's bound.
        for (const { event, position } of found.events) if (stream.wanted(event)) response.write(stream.text(event, position))
        replayed += found.events.length
        const last = found.events.at(-1)
        if (found.complete || last === undefined) break
        from = last.position
        if (!(await readBy(response))) {
          logger.warn({ companyId, replayed }, 'event stream: dropped while replaying its backlog, its client not reading')
          return stream.drop()
        }
      }
      const waited = stream.waiting
      stream.waiting = undefined
      for (const text of waited) stream.write(text)
      if (replayed >= PAGE) logger.info({ companyId, replayed, ms: Date.now() - started }, 'event stream: backlog replayed')
    } catch (error) {
      logger.warn({ err: error, companyId }, 'event stream: backlog could not be read (the client resumes from what it got)')
      stream.drop()
    } finally {
      stream.waiting = undefined
      replays--
    }
  }

  return { replay, replaying: () => replays }
}
