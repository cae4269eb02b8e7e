import { performance } from 'node:perf_hooks'
import { call } from '../../support/http-client.js'
import { sleep, waitFor } from '../../support/poll.js'
import type { Credentials } from './http.js'
import { LEASE_MS } from './scenario.js'

/**
 * What the driver and the probes hold on the nodes to see a change's effects the moment its
 * write answers: sessions (SPEC §8.1, held through node-host.mjs's /chaos/sessions routes)
 * and one event stream per node (SPEC §8.2; the node notes what it handed to each stream's
 * socket, /chaos/stream/written).
 */
const now = () => performance.now()

/** docs/live-revocation.md, "A node that lost Redis": a node that did not acknowledge aborts within a lease plus a store read of the 200. */
export const SESSION_BOUND_MS = LEASE_MS + 1000
/** A node that missed a change (a fault near) still writes its events once it reads the store again (every second); past this, they are lost. */
export const STREAM_LATE_LIMIT_MS = 15_000

/** A session held open on a node, once its open answered. */
export interface HeldSession {
  node: number
  id: string
  openedEnd: number
  /** a change that ends it answered 200: it was checked then */
  ended: boolean
}

/** One ended session's checks: open when asked right after the 200 (undefined: could not ask), and after the bound. */
export interface SessionFinding {
  node: number
  what: string
  end: number
  openAtAnswer: boolean | undefined
  /** how long after the 200 the node's answer came back (the check is only as strict as this is short) */
  askedIn: number
  openAfterBound?: boolean | undefined
}

/** One event's check on one node's stream: written when asked right after the 200 (undefined: could not ask), else how long after the 200 it was. */
export interface StreamFinding {
  node: number
  what: string
  end: number
  writtenAtAnswer: boolean | undefined
  askedIn: number
  /** ms after the 200 it was seen written, when not at once; undefined: never within STREAM_LATE_LIMIT_MS, or the stream reconnected meanwhile */
  writtenLate?: number | undefined
  /** the stream was reconnected before it was seen: not a finding */
  reconnected?: boolean
}

/** Whether each session (by id) is still open on `node`; undefined when the node did not answer. */
export async function sessionsOpen(url: string, ids: string[]): Promise<boolean[] | undefined> {
  const answer = await call(url, 'POST', '/chaos/sessions/status', { ids }).catch(() => undefined)
  if (answer?.status !== 200) return undefined
  return (answer.body.sessions as Array<{ open: boolean }>).map((x) => x.open)
}

/** Whether the node handed the event known by `key` (node-host.mjs eventKey) to a stream; undefined when it did not answer. */
export async function writtenOn(url: string, key: string): Promise<boolean | undefined> {
  const answer = await call(url, 'POST', '/chaos/stream/written', { keys: [key] }).catch(() => undefined)
  return answer?.status === 200 ? Boolean(answer.body.written[0]) : undefined
}

export type SessionHolder = ReturnType<typeof holdSessions>

/** Sessions held on every node, and the checks of those a change ended (`settled()` waits for the checks still running). */
export function holdSessions(nodes: string[]) {
  const counts = { opened: 0, refused: 0 }
  const refusedCodes = new Map<string, number>()
  const findings: SessionFinding[] = []
  const pending: Array<Promise<void>> = []

  const openEverywhere = async (token: string): Promise<HeldSession[]> => {
    const answers = await Promise.all(nodes.map((url) => call(url, 'POST', '/chaos/sessions', { token }).catch(() => undefined)))
    const openedEnd = now()
    const held: HeldSession[] = []
    for (const [node, answer] of answers.entries()) {
      if (answer?.status === 200 && typeof answer.body.id === 'string') {
        counts.opened++
        held.push({ node, id: answer.body.id, openedEnd, ended: false })
      } else {
        counts.refused++
        const code = answer === undefined ? 'no answer' : String(answer.body?.refused ?? answer.status)
        refusedCodes.set(code, (refusedCodes.get(code) ?? 0) + 1)
      }
    }
    return held
  }
  const closeEverywhere = async (held: HeldSession[]): Promise<void> => {
    await Promise.all(held.map(({ node, id }) => call(nodes[node]!, 'POST', '/chaos/sessions/close', { ids: [id] }).catch(() => undefined)))
  }
  /** A change that ends `ended` answered 200 at `end`: each node holding some is asked at once, and again after the bound if open. */
  const checkEnded = (ended: HeldSession[], end: number, what: string) => {
    for (const session of ended) session.ended = true
    for (const node of nodes.keys()) {
      const list = ended.filter((x) => x.node === node)
      if (!list.length) continue
      pending.push(
        (async () => {
          const first = await sessionsOpen(nodes[node]!, list.map((x) => x.id))
          const askedIn = now() - end
          const found = list.map((_, k): SessionFinding => ({ node, what, end, openAtAnswer: first?.[k], askedIn }))
          findings.push(...found)
          // Open (or not asked): asked again once the documented bound (docs/live-revocation.md) for a node that did not acknowledge passed.
          const again = found.flatMap((f, k) => (f.openAtAnswer === false ? [] : [k]))
          if (!again.length) return
          await sleep(SESSION_BOUND_MS)
          const second = await sessionsOpen(nodes[node]!, again.map((k) => list[k]!.id))
          for (const [j, k] of again.entries()) found[k]!.openAfterBound = second?.[j]
        })(),
      )
    }
  }
  return { counts, refusedCodes, findings, openEverywhere, closeEverywhere, checkEnded, settled: () => Promise.all(pending) }
}

export type StreamWatch = Awaited<ReturnType<typeof watchStreams>>

/**
 * One event stream per node, of the company of `creds`, held until `stop()` (reconnected when
 * it drops); resolves once every node's is connected. `check` asks every node whose stream
 * was connected since before a write whether the write's event is on it.
 */
export async function watchStreams(nodes: string[], creds: Credentials) {
  const watches = nodes.map(() => ({ connectedAt: undefined as number | undefined, generation: 0 }))
  const stopping = new AbortController()
  const basic = `Basic ${Buffer.from(`${creds.keyId}:${creds.keySecret}`).toString('base64')}`
  const watching = nodes.map(async (url, node) => {
    const watch = watches[node]!
    while (!stopping.signal.aborted) {
      try {
        const response = await fetch(`${url}/rest/v1/auth/events`, { headers: { authorization: basic, accept: 'text/event-stream' }, signal: stopping.signal })
        if (response.status === 200 && response.body) {
          watch.connectedAt = now()
          watch.generation++
          for await (const _ of response.body) void _
        }
      } catch {
        // dropped, refused or stopped: reconnected below unless stopped
      }
      watch.connectedAt = undefined
      if (!stopping.signal.aborted) await sleep(200)
    }
  })
  const findings: StreamFinding[] = []
  const pending: Array<Promise<void>> = []
  let unchecked = 0
  try {
    await waitFor('an event stream on every node', () => watches.every((w) => w.connectedAt !== undefined), { until: (ok) => ok, timeoutMs: 10_000, everyMs: 20 })
  } catch (error) {
    stopping.abort()
    throw error
  }

  /** A write that began at `start` answered 200 at `end`: its event `key` must be on every node's stream already. */
  const check = (start: number, end: number, key: string, what: string) => {
    for (const node of nodes.keys()) {
      const watch = watches[node]!
      if (watch.connectedAt === undefined || watch.connectedAt > start) {
        unchecked++
        continue
      }
      const generation = watch.generation
      pending.push(
        (async () => {
          const written = await writtenOn(nodes[node]!, key)
          const finding: StreamFinding = { node, what, end, writtenAtAnswer: written, askedIn: now() - end }
          findings.push(finding)
          if (written === true) return
          while (now() - end < STREAM_LATE_LIMIT_MS) {
            await sleep(100)
            if (watch.generation !== generation) return void (finding.reconnected = true)
            if ((await writtenOn(nodes[node]!, key)) === true) return void (finding.writtenLate = now() - end)
          }
        })(),
      )
    }
  }
  return {
    findings,
    check,
    unchecked: () => unchecked,
    /** connected since before `at` on every node */
    connectedSince: (at: number) => watches.every((w) => w.connectedAt !== undefined && w.connectedAt <= at),
    settled: () => Promise.all(pending),
    async stop() {
      stopping.abort()
      await Promise.all(watching)
    },
  }
}
