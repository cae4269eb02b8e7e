import type { InvalidationBus } from '../bus/bus.js'
import type { VerifyToken } from '../auth/verify.js'
import type { AppliedChange } from '../domain.js'
import { denials, errors, StoreUnavailableError, type Denial } from '../errors.js'
import type { Store } from '../store/store.js'
import { createExpiry } from './expiry.js'
import { createSessionIndex, isOfRow, type IndexKind } from './index.js'
import { denialOf, type Rows } from './recheck.js'
import { Session, sessionFacts, type EndReason } from './session.js'

/** Ids per query when every open session is read again: a few queries, none of them huge. */
const RECHECK_CHUNK = 5000
/** changes remembered for the opens in flight; an open that saw more re-reads the store */
const RECENT_CHANGES = 1024

/** An accepted token's session (`ok`, `identity`, `signal`, `close`), or the denial. */
export type OpenedSession = Session | { ok: false; denial: Denial }

export interface SessionsOptions {
  verifyToken: VerifyToken
  bus: Pick<InvalidationBus, 'trusted'>
  store: Pick<Store, 'getUsers' | 'getAgents' | 'getCompanyStates' | 'revokedAmong'>
  clockToleranceSeconds: number
  /** how often a node that cannot trust its cache re-checks every open session (CACHE_LEASE_MS) */
  recheckEveryMs: number
  /** how long a change's re-check may wait for its read before ending its sessions (default: half of recheckEveryMs) */
  changeReadDeadlineMs?: number
  /** a re-check that could not read the store (the sessions it was for were ended, or are kept: see below) */
  onRecheckError?: (error: unknown) => void
  now?: () => number
}

export interface Sessions {
  /** SPEC §8.1: the checks of §3.3; an accepted token is watched until it stops being valid. Rejects when it cannot decide (503). */
  open(token: string | undefined): Promise<OpenedSession>
  /** open sessions */
  readonly size: number
  /** entries of each index and of the expiry heap: all 0 once every session ended (two jtis may share an entry: index.ts) */
  stats(): { open: number; users: number; companies: number; agents: number; jtis: number; expiries: number }
  /** A committed change (change-pipeline.ts): the sessions it ends are aborted before the promise (if any) settles; how many it ended. */
  onChange(change: AppliedChange): number | Promise<number>
  /** A new epoch: every open session is read again. */
  onEpoch(): void
  /** open sessions of a company or an agent on this node (SPEC §10.2's revocation preview) */
  count(scope: 'company' | 'agent', id: string): number
  /** the node closes: every open session is aborted with NODE_CLOSING */
  close(): void
}

const reason = (denial: { code: string; message: string }): EndReason => ({ code: denial.code, message: denial.message })
const unavailable = errors.unavailable()
/** A change could not be checked against the store: its sessions end (ending a valid one is safe, keeping a revoked one is not). */
export const UNDECIDED: EndReason = { code: unavailable.code, message: unavailable.message }
export const NODE_CLOSING: EndReason = { code: 'NODE_CLOSING', message: 'The node is shutting down' }

/**
 * Sessions of SPEC §8.1: each accepted token's session is indexed by the rows that can end
 * it (index.ts) and by its expiry (expiry.ts). Every change the bus delivers is looked up
 * there: none of its sessions open (the usual case), nothing happens and nothing is
 * awaited; otherwise those sessions alone are re-checked against the store and the ones it
 * ends are aborted before the handler's promise settles, that is before this node
 * acknowledges the change (and before a writer on this node answers).
 */
export function createSessions(options: SessionsOptions): Sessions {
  const { verifyToken, bus, store, clockToleranceSeconds } = options
  const now = options.now ?? Date.now
  const onRecheckError = options.onRecheckError ?? (() => {})
  // A change's re-check holds the node's acknowledgement, which must come well within the
  // lease (past it the writer answers without this node): a read slower than half of it
  // ends the sessions it was for instead.
  const changeReadDeadlineMs = options.changeReadDeadlineMs ?? options.recheckEveryMs / 2
  const index = createSessionIndex()
  const expiry = createExpiry((session) => end(session, reason(denials.expired)), clockToleranceSeconds, now)
  let open = 0
  let closing = false
  // The last changes' rows (two arrays of references: nothing allocated per change), and
  // counters moved by every change and epoch: an open whose checks ran while a change of one
  // of its rows came, or an epoch, or more changes than the ring holds, re-reads the store.
  const recentKinds: Array<IndexKind | undefined> = new Array(RECENT_CHANGES)
  const recentIds: string[] = new Array(RECENT_CHANGES)
  let changesSeen = 0
  let epochs = 0
  function changedSince(seen: number, session: Session): boolean {
    if (changesSeen - seen > RECENT_CHANGES) return true
    for (let n = seen; n < changesSeen; n++) {
      const kind = recentKinds[n % RECENT_CHANGES]
      if (kind !== undefined && isOfRow(kind, recentIds[n % RECENT_CHANGES]!, session)) return true
    }
    return false
  }

  const owner = { end }
  // this registry's sessions: it is on their prototype, not in a field of each
  class NodeSession extends Session {
    protected get owner() {
      return owner
    }
  }
  /** true when it was open */
  function end(session: Session, why: EndReason | undefined): boolean {
    if (!session.open) return false
    // leaving the expiry heap is what marks it ended
    expiry.remove(session)
    open--
    index.remove(session)
    if (why !== undefined) session.abort(why)
    return true
  }

  /** Reads the rows the given sessions depend on (batched, by chunks), and ends those they fail. */
  async function recheck(sessions: Session[]): Promise<void> {
    const ids = { user: new Set<string>(), company: new Set<string>(), agent: new Set<string>(), token: new Set<string>() }
    for (const session of sessions) {
      ids.user.add(session.userId)
      ids.company.add(session.companyId)
      ids.agent.add(session.agentId)
      if (session.jti) ids.token.add(session.jti)
    }
    const [users, companies, agents, revoked] = await Promise.all([
      chunked(ids.user, (chunk) => store.getUsers(chunk)),
      chunked(ids.company, (chunk) => store.getCompanyStates(chunk)),
      chunked(ids.agent, (chunk) => store.getAgents(chunk)),
      chunked(ids.token, (chunk) => store.revokedAmong(chunk)),
    ])
    const user = new Map(users.map((row) => [row.id, row]))
    const company = new Map(companies.map((row) => [row.id, row]))
    const agent = new Map(agents.map((row) => [row.id, row]))
    const revokedJtis = new Set(revoked)
    for (const session of sessions) {
      if (!session.open) continue
      const denial = denialOf(session, {
        user: user.get(session.userId) ?? null,
        company: company.get(session.companyId) ?? null,
        agent: agent.get(session.agentId) ?? null,
        jtiRevoked: session.jti !== undefined && revokedJtis.has(session.jti),
      })
      if (denial !== undefined) end(session, reason(denial))
    }
  }

  /** One row changed: its sessions are checked against that row as the store has it now; how many it ended. */
  async function recheckRow(kind: Exclude<IndexKind, 'token'>, id: string, sessions: Session[]): Promise<number> {
    let rows: Rows
    let ended = 0
    try {
      rows = await withinDeadline(readRow(kind, id), changeReadDeadlineMs)
    } catch (error) {
      onRecheckError(error)
      for (const session of sessions) if (end(session, UNDECIDED)) ended++
      return ended
    }
    for (const session of sessions) {
      const denial = session.open ? denialOf(session, rows) : undefined
      if (denial !== undefined && end(session, reason(denial))) ended++
    }
    return ended
  }

  async function readRow(kind: Exclude<IndexKind, 'token'>, id: string): Promise<Rows> {
    if (kind === 'user') return { user: (await store.getUsers([id]))[0] ?? null }
    if (kind === 'company') return { company: (await store.getCompanyStates([id]))[0] ?? null }
    return { agent: (await store.getAgents([id]))[0] ?? null }
  }

  /** A committed change (change-pipeline.ts, its second step): the sessions it ends are aborted before the promise settles; how many. */
  function onChange(change: AppliedChange): number | Promise<number> {
    const kind = kindOf(change)
    const { id } = change
    recentKinds[changesSeen % RECENT_CHANGES] = kind
    recentIds[changesSeen % RECENT_CHANGES] = id
    changesSeen++
    if (kind === undefined) return 0
    const sessions = index.of(kind, id)
    if (sessions === undefined) return 0
    // a revoked jti is revoked for good: nothing to read
    if (kind === 'token') {
      let ended = 0
      for (const session of sessions) if (end(session, reason(denials.revoked))) ended++
      return ended
    }
    return recheckRow(kind, id, sessions)
  }

  // Changes may have been missed: every open session is read again, and again once per lease
  // while the cache cannot be trusted (the sweep below).
  function onEpoch(): void {
    epochs++
    void sweep()
  }
  let sweeping = false
  // asked for while one ran: that one's reads may predate what the new request is about
  let sweepAgain = false
  async function sweep(): Promise<void> {
    if (sweeping) return void (sweepAgain = true)
    sweeping = true
    try {
      do {
        sweepAgain = false
        if (open === 0 || closing) return
        // A failed sweep ends nothing (a store outage would otherwise drop every connection; no
        // revocation commits while the store cannot be read): the next period tries again.
        await recheck([...index.all()]).catch((error) => onRecheckError(error))
      } while (sweepAgain)
    } finally {
      sweeping = false
    }
  }
  const sweeper = setInterval(() => {
    if (!bus.trusted()) void sweep()
  }, options.recheckEveryMs)
  sweeper.unref()

  return {
    onChange,
    onEpoch,
    count: (scope, id) => index.of(scope, id)?.filter((session) => session.open).length ?? 0,
    async open(token) {
      if (closing) throw new StoreUnavailableError('the node is closing')
      const changesBefore = changesSeen
      const epochsBefore = epochs
      const verdict = await verifyToken(token)
      if (!verdict.ok) return { ok: false, denial: verdict.denial }
      if (closing) throw new StoreUnavailableError('the node is closing')
      const { claims, identity } = verdict
      const facts = sessionFacts(claims)
      const session = new NodeSession(
        index.cohortFor(identity.user.companyId, identity.agent.id, identity.agent.name, facts.companyGeneration, facts.agentGeneration),
        identity.user.id,
        identity.user.externalId,
        claims.jti,
        facts.tokenVersion,
        claims.exp,
      )
      index.add(session)
      expiry.add(session)
      open++
      if (epochs !== epochsBefore || changedSince(changesBefore, session)) {
        // A change of its rows came while the checks ran: what they read may predate it. The session is
        // indexed now, so any later change finds it; this read covers the ones before.
        try {
          await recheck([session])
        } catch (error) {
          end(session, undefined)
          throw error
        }
      }
      if (!session.open) {
        const why = session.signal.reason as EndReason
        const denial = Object.values(denials).find((d) => d.code === why.code)
        if (denial === undefined) throw new StoreUnavailableError(`session ended while it opened: ${why.code}`)
        return { ok: false, denial }
      }
      return session
    },
    get size() {
      return open
    },
    stats: () => ({ open, ...index.sizes(), expiries: expiry.size }),
    close() {
      closing = true
      clearInterval(sweeper)
      for (const session of [...index.all()]) end(session, NODE_CLOSING)
      expiry.stop()
    },
  }
}

/** The index a change looks in; API keys end no session. */
function kindOf(change: AppliedChange): IndexKind | undefined {
  return change.kind === 'apiKey' ? undefined : change.kind
}

function withinDeadline<T>(read: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StoreUnavailableError(`the store did not answer within ${ms} ms`)), ms)
  })
  return Promise.race([read, late]).finally(() => clearTimeout(timer))
}

async function chunked<T>(ids: Set<string>, read: (chunk: string[]) => Promise<T[]>): Promise<T[]> {
  const all = [...ids]
  const reads: Array<Promise<T[]>> = []
  for (let start = 0; start < all.length; start += RECHECK_CHUNK) reads.push(read(all.slice(start, start + RECHECK_CHUNK)))
  return (await Promise.all(reads)).flat()
}
