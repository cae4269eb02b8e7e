/**
 * The requests of the kit's loads (bench/lib/load.ts): verifications over the hot set, the
 * cold set, revoked tokens; token requests; invalidations; and `mixed`, with its model of
 * every user's version that judges each answer.
 */
import { randomBytes } from 'node:crypto'
import { stableStart, tokenVersionOf, type Dataset } from './data.js'
import type { RequestSpec, Slot, Workload } from './load.js'

const VERIFY = '/rest/v1/auth/verify'
const TOKEN = '/rest/v1/auth/token'
const INVALIDATE = '/rest/v1/auth/invalidate-token'

function bearer(token: string): Record<string, string> {
  return { authorization: 'Bearer ' + token }
}

function jsonString(s: string): string {
  return JSON.stringify(s)
}

/** Round-robins over the hot set: a working set that fits every cache. */
export function verifyHot(ds: Dataset): Workload {
  const start = stableStart(ds.layout)
  const headers = Array.from({ length: ds.layout.hot }, (_, i) => bearer(ds.token(start + i)))
  let n = 0
  return {
    next: () => ({ method: 'GET', path: VERIFY, headers: headers[n++ % headers.length]! }),
  }
}

/** Headers a connection or a framing sets, not the answer: the `answer` baseline's Fastify sets its own. */
const FRAMING = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding'])

/**
 * The node's answer to the first verify-hot request, as JSON {headers, body}: what the
 * `answer` baseline (bench/baselines/server.ts) sends to every request.
 */
export async function verifyAnswer(url: string, ds: Dataset): Promise<string> {
  const response = await fetch(url + VERIFY, { headers: bearer(ds.token(stableStart(ds.layout))) })
  const body = await response.text()
  if (response.status !== 200) throw new Error(`verify answered ${response.status} to a hot token: ${body}`)
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    if (!FRAMING.has(name)) headers[name] = value
  })
  return JSON.stringify({ headers, body })
}

/** Round-robins over the mixed users' revoked tokens (an older token_version): every answer a 401 from the caches. */
export function verifyRevoked(ds: Dataset): Workload {
  const headers = ds.mixed.stale.filter((token) => token !== undefined).map(bearer)
  let n = 0
  return {
    next: () => ({ method: 'GET', path: VERIFY, headers: headers[n++ % headers.length]! }),
  }
}

/** The mixed users' current tokens in turn, every tenth request one of their revoked tokens instead. */
export function verifyOneInTenRevoked(ds: Dataset): Workload {
  const current = ds.mixed.current.map(bearer)
  const revoked = ds.mixed.stale.filter((token) => token !== undefined).map(bearer)
  let n = 0
  return {
    next: () => ({ method: 'GET', path: VERIFY, headers: ++n % 10 === 0 ? revoked[(n / 10) % revoked.length]! : current[n % current.length]! }),
  }
}

/**
 * Uniformly random over every unchanging user: with more users than the cache holds, most
 * verifications miss. Every token is signed up front: signing in the load generator during
 * the run (a fresh token per draw) would measure the generator's HMAC, on the same cores.
 */
export function verifyCold(ds: Dataset): Workload {
  const start = stableStart(ds.layout)
  const span = ds.layout.users - start
  const headers = Array.from({ length: span }, (_, i) => bearer(ds.token(start + i)))
  return {
    next: () => ({ method: 'GET', path: VERIFY, headers: headers[Math.floor(Math.random() * span)]! }),
  }
}

/**
 * Every user once, in order (the mixed ones with their current token; run before any
 * invalidation): fills a node's cache for the memory measurement.
 */
export function verifyAllOnce(ds: Dataset): Workload {
  const { users, mixed } = ds.layout
  let i = 0
  const tokenOf = (u: number) => (u < mixed ? ds.mixed.current[u]! : ds.token(u))
  return {
    next: () => ({ method: 'GET', path: VERIFY, headers: bearer(tokenOf(i < users ? i++ : Math.floor(Math.random() * users))) }),
  }
}

function keyPrefix(ds: Dataset): string {
  return `{"keyId":${jsonString(ds.keyId)},"keySecret":${jsonString(ds.keySecret)},`
}

/** Tokens for users that exist (the hot set): credentials check, user lookup, signing. */
export function issueExisting(ds: Dataset): Workload {
  return issueRoundRobin(issueBodies(ds, stableStart(ds.layout), ds.layout.hot))
}

/** The token request bodies of users [from, from + count), with the dataset's API key. */
function issueBodies(ds: Dataset, from: number, count: number): string[] {
  const prefix = keyPrefix(ds)
  return Array.from({ length: count }, (_, i) => `${prefix}"userId":${jsonString(ds.externalId(from + i))}}`)
}

function issueRoundRobin(bodies: string[]): Workload {
  let n = 0
  return {
    next: () => ({ method: 'POST', path: TOKEN, body: bodies[n++ % bodies.length]! }),
  }
}

/**
 * One token for each mixed user, in order, answers unread: afterwards the node knows each
 * user's external id, as it does for every user who had a token before. Run before `mixed`,
 * whose 4 % of token requests would otherwise measure, for as long as users drawn at random
 * stay new to the node (all of round 1 and much of round 2), a first contact that SQL-prepared
 * users make in no deployment. The version the tokens carry is the one the model holds.
 */
export function issueMixedOnce(ds: Dataset): Workload {
  return issueRoundRobin(issueBodies(ds, 0, ds.layout.mixed))
}

/** Tokens for users never seen: each one an INSERT committed. */
export function issueNew(ds: Dataset): Workload {
  const prefix = keyPrefix(ds)
  const tag = randomBytes(4).toString('hex')
  let n = 0
  return {
    next: () => ({ method: 'POST', path: TOKEN, body: `${prefix}"userId":"new-${tag}-${n++}"}` }),
  }
}

/** Invalidations round-robin over the invalidate range: each one an UPDATE committed (and, on a cluster, published). */
export function invalidate(ds: Dataset): Workload {
  const { mixed, invalidate: count } = ds.layout
  const prefix = keyPrefix(ds)
  const bodies = Array.from({ length: count }, (_, i) => `${prefix}"customerUserId":${jsonString(ds.userId(mixed + i))}}`)
  let n = 0
  return {
    next: () => ({ method: 'POST', path: INVALIDATE, body: bodies[n++ % bodies.length]! }),
  }
}

/** `mixed`'s draw: 95 % verifications, 1 % invalidations, the rest token requests (its shape on the baseline server draws the same). */
const MIXED_VERIFY_SHARE = 0.95
const MIXED_INVALIDATE_SHARE = 0.01

/**
 * `mixed`'s shape without its model, for the baseline server of plain UPDATEs (whose verify
 * and token routes answer a constant): 95 % the verify-hot requests, 4 % token requests for
 * hot users, 1 % invalidations over the invalidate range, drawn at random as `mixed` draws.
 * It measures what a server that commits 1 % of its requests can reach on this machine.
 */
export function mixedShape(ds: Dataset): Workload {
  const verify = verifyHot(ds)
  const issue = issueExisting(ds)
  const write = invalidate(ds)
  return {
    next(slot: Slot): RequestSpec {
      const r = Math.random()
      return r < MIXED_VERIFY_SHARE ? { ...verify.next(slot), kind: 'verify' } : r < 1 - MIXED_INVALIDATE_SHARE ? { ...issue.next(slot), kind: 'issue' } : { ...write.next(slot), kind: 'invalidate' }
    },
  }
}

export interface MixedStats {
  verifies: number
  staleSent: number
  /** verifications whose answer could go either way (an invalidation of the user was in flight) */
  ambiguous: number
  staleAccepted: number
  currentRefused: number
  /** an issued token older than an invalidation that had already answered */
  staleIssued: number
  /** an invalidation that did not raise the version above what was known when it was sent */
  lostIncrement: number
  unexpectedStatus: number
}

/**
 * 95 % verify, 4 % issue, 1 % invalidate over the mixed users, a share of the
 * verifications carrying a token revoked earlier. The client keeps a model of every
 * user's version: once an invalidation has answered, a token older than it must be
 * refused and the current one accepted, on every node.
 */
export function mixed(
  ds: Dataset,
  options: {
    staleShare?: number
    /** the share of requests that are invalidations, the rest of the 5 % being token requests (0.01) */
    invalidateShare?: number
    readVersion?: (userId: string) => Promise<number | undefined>
  } = {},
): Workload & { stats: MixedStats; state(): Dataset['mixed']; reset(): void; settle(): Promise<void> } {
  const staleShare = options.staleShare ?? 0.1
  const issueBelow = 1 - (options.invalidateShare ?? MIXED_INVALIDATE_SHARE)
  const m = ds.layout.mixed
  const version = ds.mixed.version.slice()
  const current = ds.mixed.current.slice()
  const currentVersion = current.map(tokenVersionOf)
  const stale = ds.mixed.stale.slice()
  const staleVersion = stale.map((t) => (t === undefined ? -1 : tokenVersionOf(t)))
  const inflight = new Int32Array(m)
  const generation = new Int32Array(m)
  const uncertain = ds.mixed.uncertain?.slice() ?? new Array<boolean>(m).fill(false)
  // invalidations whose answers were abandoned when a run ended: their users' versions are unknown
  const settleInflight = () => {
    for (let u = 0; u < m; u++) {
      if (inflight[u]! > 0) {
        uncertain[u] = true
        inflight[u] = 0
      }
    }
  }
  const prefix = keyPrefix(ds)
  const tokenBodies = issueBodies(ds, 0, m)
  const invalidateBodies = Array.from({ length: m }, (_, i) => `${prefix}"customerUserId":${jsonString(ds.userId(i))}}`)
  const stats: MixedStats = { verifies: 0, staleSent: 0, ambiguous: 0, staleAccepted: 0, currentRefused: 0, staleIssued: 0, lostIncrement: 0, unexpectedStatus: 0 }

  const keep = (u: number, token: string, v: number) => {
    if (v > currentVersion[u]!) {
      stale[u] = current[u]
      staleVersion[u] = currentVersion[u]!
      current[u] = token
      currentVersion[u] = v
    }
  }

  return {
    stats,
    /** the model as it stands, for the next run to start from */
    state: () => {
      settleInflight()
      return { version: version.slice(), current: current.slice(), stale: stale.slice(), uncertain: uncertain.slice() }
    },
    reset: () => {
      settleInflight()
      for (const k of Object.keys(stats) as Array<keyof MixedStats>) stats[k] = 0
    },
    async settle() {
      // An invalidation abandoned in flight when a run ended may still commit after it: its
      // user's version is unknown (never judged) until read back from the store once the
      // stragglers are done. Without a way to read it back, the user stays unjudged.
      settleInflight()
      if (!options.readVersion) return
      const pending = [...uncertain.keys()].filter((u) => uncertain[u])
      if (pending.length === 0) return
      await new Promise((r) => setTimeout(r, 1000))
      for (const u of pending) {
        const v = await options.readVersion(ds.userId(u)).catch(() => undefined)
        if (v !== undefined) {
          version[u] = v
          uncertain[u] = false
        }
      }
    },
    next(slot: Slot): RequestSpec {
      const u = Math.floor(Math.random() * m)
      const r = Math.random()
      slot.u = u
      slot.gen = generation[u]
      slot.inflight = inflight[u]
      slot.known = version[u]
      if (r < MIXED_VERIFY_SHARE) {
        const useStale = stale[u] !== undefined && Math.random() < staleShare
        const token = useStale ? stale[u]! : current[u]!
        slot.op = 'verify'
        slot.tv = useStale ? staleVersion[u] : currentVersion[u]
        return { method: 'GET', path: VERIFY, headers: bearer(token), kind: 'verify' }
      }
      if (r < issueBelow) {
        slot.op = 'issue'
        return { method: 'POST', path: TOKEN, body: tokenBodies[u]!, kind: 'issue' }
      }
      slot.op = 'invalidate'
      inflight[u]!++
      generation[u]!++
      return { method: 'POST', path: INVALIDATE, body: invalidateBodies[u]!, kind: 'invalidate' }
    },
    check(slot: Slot, status: number, body: string): boolean {
      const u = slot.u as number
      switch (slot.op) {
        case 'verify': {
          stats.verifies++
          const tv = slot.tv as number
          if (tv < (slot.known as number)) stats.staleSent++
          if (status !== 200 && status !== 401) {
            stats.unexpectedStatus++
            return false
          }
          if ((slot.inflight as number) > 0 || generation[u] !== slot.gen || uncertain[u]) {
            stats.ambiguous++
            return true
          }
          const shouldAccept = tv === version[u]
          if (shouldAccept && status !== 200) {
            stats.currentRefused++
            return false
          }
          if (!shouldAccept && status === 200) {
            stats.staleAccepted++
            return false
          }
          return true
        }
        case 'issue': {
          if (status !== 200) {
            stats.unexpectedStatus++
            return false
          }
          const token = (JSON.parse(body) as { token: string }).token
          const v = tokenVersionOf(token)
          keep(u, token, v)
          if ((slot.inflight as number) > 0 || generation[u] !== slot.gen || uncertain[u]) return true
          if (v < version[u]!) {
            stats.staleIssued++
            return false
          }
          return true
        }
        case 'invalidate': {
          inflight[u]!--
          generation[u]!++
          if (status !== 200) {
            stats.unexpectedStatus++
            return false
          }
          const v = (JSON.parse(body) as { newTokenVersion: number }).newTokenVersion
          if (v > version[u]!) version[u] = v
          if (!uncertain[u] && v <= (slot.known as number)) {
            stats.lostIncrement++
            return false
          }
          return true
        }
      }
      return true
    },
  }
}

/**
 * The mixed model as a run left it, for the next run to start from, the users whose
 * version it no longer knows included: left out, the next run would judge them by a version
 * an abandoned invalidation may have raised, and count its own answers as wrong.
 */
export function saveMixed(ds: Dataset, workload: ReturnType<typeof mixed>): void {
  const state = workload.state()
  ds.mixed.version = state.version
  ds.mixed.current = state.current
  ds.mixed.stale = state.stale
  ds.mixed.uncertain = state.uncertain
}

/** The counts of several runs of `mixed`, added up. */
export function sumMixedStats(list: MixedStats[]): MixedStats {
  const total: MixedStats = { verifies: 0, staleSent: 0, ambiguous: 0, staleAccepted: 0, currentRefused: 0, staleIssued: 0, lostIncrement: 0, unexpectedStatus: 0 }
  for (const s of list) for (const k of Object.keys(total) as Array<keyof MixedStats>) total[k] += s[k]
  return total
}
