import type { InvalidationBus, NodeStatusRecord, Question } from '../bus/bus.js'
import type { States } from '../cache/states.js'
import type { ClockWatch } from '../clock/offset.js'
import type { Sessions } from '../sessions/sessions.js'
import type { Store } from '../store/store.js'
import type { EventHub } from '../stream/hub.js'
import { VERSION } from '../version.js'
import type { OnClose } from './lifecycle.js'

/** SPEC §10.2, `GET /admin/v1/nodes`: one live node as the listing shows it. */
export interface NodeView {
  nodeId: string
  version: string | null
  startedAt: string | null
  ready: boolean
  trusted: boolean
  /** since when the node has not trusted its cache (null: it does) */
  untrustedSince: string | null
  /** the last change it applied, from any node */
  lastChangeAt: string | null
  /** its last whole read of the change log (null: none, or the embedded store, which has no log to read) */
  changeLogReadAt: string | null
  /** changes committed since that read, and how long ago it was */
  behind: { changes: number; ms: number }
  cache: { users: number; bytes: number }
  sessions: number
  eventStreams: number
  /** its clock against PostgreSQL's (null before a first reading) */
  clockOffsetMs: number | null
  /** the Redis server it follows, and whether its subscription is live (null: the embedded single node) */
  redis: { follows: string | null; subscribed: boolean } | null
}

export interface Nodes {
  list(): Promise<NodeView[]>
  /** open sessions of a company or an agent across the live nodes, and how many of them answered */
  openSessions(question: Question): Promise<{ total: number; nodes: number; answered: number }>
  /** the change pipeline applied a change (its time goes into this node's status) */
  changeApplied(): void
}

/** How often a node writes its status for the others: the console's nodes page refreshes every 2 s. */
const STATUS_EVERY_MS = 1000

/**
 * This node's status, written on the bus's board every second for the other nodes to list
 * (bus/publishing/board.ts), and the listing of every live node; on a bus of one node, the
 * listing is this node. It also answers the board's question (open sessions of a company or
 * agent) from this node's sessions.
 */
export function openNodes(
  onClose: OnClose,
  parts: { bus: InvalidationBus; store: Pick<Store, 'changesAfter'>; states: States; sessions: Sessions; hub: Pick<EventHub, 'size'>; clock: ClockWatch; warmedUp(): boolean },
): Nodes {
  const { bus, store, states, sessions, hub, clock } = parts
  const { nodeId } = bus
  const startedAt = new Date().toISOString()
  let lastChangeAt: number | undefined
  let untrustedSince: number | undefined

  function status(): Record<string, unknown> {
    const health = bus.health()
    const at = Date.now()
    if (health.trusted) untrustedSince = undefined
    else untrustedSince ??= at
    return {
      nodeId,
      version: VERSION,
      startedAt,
      ready: health.ready && parts.warmedUp() && clock.state() !== 'skewed',
      trusted: health.trusted,
      untrustedSince: iso(untrustedSince),
      lastChangeAt: iso(lastChangeAt),
      changeLogReadAt: iso(health.changeLogReadAt),
      cache: { users: states.caches.users.size, bytes: states.bytes().users },
      sessions: sessions.size,
      eventStreams: hub.size(),
      clockOffsetMs: clock.reading() === undefined ? null : Math.round(clock.reading()!.offsetMs),
      redis: health.redis === undefined ? null : { follows: health.redis.follows ?? null, subscribed: health.redis.subscribed },
    }
  }

  const board = bus.board
  if (board !== undefined) {
    board.onQuestion((question) => sessions.count(question.scope, question.key))
    const timer = setInterval(() => board.publish(status()), STATUS_EVERY_MS)
    timer.unref()
    board.publish(status())
    onClose(() => clearInterval(timer))
  }

  /** The listing's line of a live node: what it wrote, and how far behind the newest committed change its last read of the log is. */
  async function view(record: NodeStatusRecord): Promise<NodeView> {
    const s = record.status ?? {}
    const readAt = typeof s.changeLogReadAt === 'string' ? Date.parse(s.changeLogReadAt) : undefined
    // The node's clock to the store's, which dates the change log.
    const offset = typeof s.clockOffsetMs === 'number' ? s.clockOffsetMs : 0
    const behind = readAt === undefined || board === undefined ? { changes: 0, ms: 0 } : { changes: await store.changesAfter(readAt + offset), ms: Math.max(0, Date.now() - readAt) }
    return {
      nodeId: record.nodeId,
      version: text(s.version),
      startedAt: text(s.startedAt),
      ready: s.ready === true,
      trusted: s.trusted === true,
      untrustedSince: text(s.untrustedSince),
      lastChangeAt: text(s.lastChangeAt),
      changeLogReadAt: text(s.changeLogReadAt),
      behind,
      cache: { users: number(s, 'cache', 'users'), bytes: number(s, 'cache', 'bytes') },
      sessions: typeof s.sessions === 'number' ? s.sessions : 0,
      eventStreams: typeof s.eventStreams === 'number' ? s.eventStreams : 0,
      clockOffsetMs: typeof s.clockOffsetMs === 'number' ? s.clockOffsetMs : null,
      redis: (s.redis as NodeView['redis']) ?? null,
    }
  }

  return {
    async list() {
      const records = board === undefined ? [{ nodeId, status: status() }] : await board.statuses()
      // This node's own line is read from itself: the board holds what it wrote up to a second ago.
      return Promise.all(records.map((record) => view(record.nodeId === nodeId ? { nodeId, status: status() } : record)))
    },
    async openSessions(question) {
      if (board === undefined) return { total: sessions.count(question.scope, question.key), nodes: 1, answered: 1 }
      return board.ask(question)
    },
    changeApplied() {
      lastChangeAt = Date.now()
    },
  }
}

const iso = (at: number | undefined): string | null => (at === undefined ? null : new Date(at).toISOString())
const text = (value: unknown): string | null => (typeof value === 'string' ? value : null)
const number = (s: Record<string, unknown>, object: string, field: string): number => {
  const value = (s[object] as Record<string, unknown> | undefined)?.[field]
  return typeof value === 'number' ? value : 0
}
