import { forgeHs256, hs256Kid } from '../../../support/helpers.js'
import { call, setupCompany } from '../../../support/http-client.js'
import { sleep, waitFor } from '../../../support/poll.js'
import type { ByKind } from '../checks.js'
import { issue, ready, verifyStatus, type Credentials } from '../http.js'
import type { Shape } from '../scenario.js'
import { SESSION_BOUND_MS, sessionsOpen, STREAM_LATE_LIMIT_MS, writtenOn } from '../watch.js'

/**
 * A probe: a deterministic sequence aimed at one mechanism (ARCHITECTURE.md's table), run
 * against the three nodes of a shape. Each makes a company of its own, so that probes run
 * one after another on one scenario (the safe run's, after its load) as well as alone on a
 * mutant's. A probe finds no violation on safe nodes, and at least one — every time — on
 * the nodes of the mutants it is aimed at (the reasoning heads each probe's file).
 */
export type Kind = keyof ByKind

export interface ProbeResult {
  name: string
  /** what the probe could check: writes that answered 200 times the nodes asked after them (0: it proved nothing) */
  checked: number
  violations: number
  byKind: ByKind
  examples: string[]
}

export type Log = (line: string) => void

/** Counts a probe's checks and violations; `result()` logs the summary line the run's tables are made of. */
export function tally(name: string, log: Log) {
  const byKind: ByKind = { version: 0, jti: 0, company: 0, session: 0, stream: 0, webhook: 0, receipt: 0 }
  const examples: string[] = []
  let checked = 0
  let violations = 0
  return {
    checked(n = 1) {
      checked += n
    },
    violation(kind: Kind, what: string, n = 1) {
      violations += n
      byKind[kind] += n
      if (examples.length < 10) examples.push(what)
    },
    result(): ProbeResult {
      for (const example of examples) log(`  violation: ${example}`)
      const kinds = Object.entries(byKind).filter(([, n]) => n > 0).map(([kind, n]) => `${kind} ${n}`)
      log(`probe ${name}: ${checked} checks, ${violations} violations${kinds.length ? ` (${kinds.join(', ')})` : ''}`)
      return { name, checked, violations, byKind, examples }
    },
  }
}

/** A company of the probe's own, with its API key's credentials. */
export async function company(s: Shape, name: string): Promise<{ companyId: string; creds: Credentials }> {
  const made = await setupCompany(s.nodes[0]!.url, name)
  return { companyId: made.companyId, creds: { keyId: made.keyId, keySecret: made.keySecret } }
}

/** `count` users of the company, each with a token, issued through the nodes in turn. */
export async function users(s: Shape, creds: Credentials, prefix: string, count: number): Promise<Array<{ token: string; userId: string }>> {
  return Promise.all(Array.from({ length: count }, (_, i) => issue(s.nodes[i % s.nodes.length]!.url, creds, `${prefix}-${i}`)))
}

/**
 * Once each node vouches for its cache (a node that does not answers from the store and may
 * cache nothing), verifies each token on it until accepted: the node's caches hold its user.
 */
export async function warm(s: Shape, tokens: string[], nodes = s.nodes): Promise<void> {
  await Promise.all(nodes.map((node) => waitFor(`${node.name} to vouch for its cache`, () => ready(node.url), { timeoutMs: 30_000, everyMs: 20 })))
  await Promise.all(
    nodes.flatMap((node) => tokens.map((token) => waitFor(`${node.name} to accept a fresh token (the probe warms its cache)`, () => verifyStatus(node.port, token), { until: (status) => status === 200, timeoutMs: 15_000 }))),
  )
}

export const invalidate = (url: string, creds: Credentials, customerUserId: string) =>
  call(url, 'POST', '/rest/v1/auth/invalidate-token', { ...creds, customerUserId }).catch(() => ({ status: 0, body: undefined }))

export const revokeToken = (url: string, creds: Credentials, token: string) => call(url, 'POST', '/rest/v1/auth/revoke-token', { ...creds, token }).catch(() => ({ status: 0, body: undefined }))

/** A token with the claims of `claims` (one issued by the nodes) but this jti and exp, signed with the nodes' key. */
export const forge = (claims: Record<string, unknown>, jti: string, exp: number): string =>
  forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...claims, jti, iat: Math.min(Number(claims.iat), exp - 1), exp })

/**
 * The writer's publishes by outcome (chat_auth_bus_publishes_total), read before and after
 * one write: `everyNodeAcked` tells whether that write answered with every node's
 * acknowledgement. On a busy machine a node may acknowledge too late; the writer then answers
 * once that node's lease ran out, and what the node does with the change is bound by the
 * docs/live-revocation.md (a session ends within a lease + a store read, an event is written once it reads the
 * store), not due at the 200. The probes then check against those bounds, as the general
 * load's checker does near a fault.
 */
export async function publishes(url: string): Promise<Map<string, number>> {
  const answer = await call(url, 'GET', '/metrics').catch(() => undefined)
  const counts = new Map<string, number>()
  for (const line of String(answer?.body ?? '').split('\n')) {
    const found = /^chat_auth_bus_publishes_total\{outcome="([a-z_]+)"\} (\d+)/.exec(line)
    if (found) counts.set(found[1]!, Number(found[2]))
  }
  return counts
}

export function everyNodeAcked(before: Map<string, number>, after: Map<string, number>): boolean {
  const moved = (outcome: string) => (after.get(outcome) ?? 0) - (before.get(outcome) ?? 0)
  return moved('acked') > 0 && [...after.keys()].every((outcome) => outcome === 'acked' || moved(outcome) === 0)
}

/** How many of these sessions (on one node) are still open once SESSION_BOUND_MS passed; undefined: the node did not answer. */
export async function openAfterBound(url: string, ids: string[]): Promise<number | undefined> {
  await sleep(SESSION_BOUND_MS)
  return (await sessionsOpen(url, ids))?.filter(Boolean).length
}

/** Whether the event `key` reaches the node's stream within STREAM_LATE_LIMIT_MS. */
export async function writtenWithin(url: string, key: string): Promise<boolean> {
  for (const end = Date.now() + STREAM_LATE_LIMIT_MS; Date.now() < end; await sleep(100)) if ((await writtenOn(url, key)) === true) return true
  return false
}
