import { waitFor } from '../../../support/poll.js'
import { ready, verifyStatus } from '../http.js'
import type { Scenario } from '../scenario.js'
import { company, invalidate, revokeToken, tally, users, warm, type Log, type ProbeResult } from './probe.js'

/**
 * Missed messages: what a node learns only from the change log after it had no subscription
 * (mutants `no-epoch-flush`, `catch-up-skips-window`, `catch-up-ignores-revoked-tokens`).
 *
 * node-1 caches users and is then cut off: its subscriber connection goes half-open (its
 * proxy swallows every byte, as the chaos fault does) and its proxy refuses new connections,
 * so that it cannot subscribe again until the probe lets it. Meanwhile, through node-0,
 * users are invalidated and tokens of other users revoked alone; each write answers 200 once
 * node-1's lease has run out (node-1 acknowledges nothing). Every message of those writes is
 * then lost to node-1 for certain, not by chance: they were published while it had no
 * subscription. Once it is let back and vouches again, the old tokens and the revoked ones
 * are presented to every node.
 *
 * Why each mutant is caught every time: node-1 holds each invalidated user at its old
 * version (cached before the cut, never evicted since) and has never seen the revoked jtis
 * (a filter that says no needs no read). Only the catch-up from the change log after its new
 * subscription can evict those users and add those jtis. `no-epoch-flush` reads nothing (and
 * does not flush); `catch-up-skips-window` reads from where it reconnected; both leave every
 * old token accepted on node-1. `catch-up-ignores-revoked-tokens` applies the invalidations
 * but not the revocations: every revoked token is accepted on node-1. A node that reads the
 * log from its cursor refuses them all.
 */
const INVALIDATED = 4
const REVOKED = 4

export async function missedMessages(s: Scenario, log: Log): Promise<ProbeResult> {
  const p = tally('missed-messages', log)
  const [node0, node1] = s.nodes as [Scenario['nodes'][0], Scenario['nodes'][0]]
  const { creds } = await company(s, 'Missed Messages Co')
  const invalidated = await users(s, creds, 'missed-user', INVALIDATED)
  const revoked = await users(s, creds, 'missed-holder', REVOKED)
  await warm(s, [...invalidated, ...revoked].map((u) => u.token), [node1])

  // Refused first: the connection node-1 makes once it gives up the half-open one must not get through.
  await s.proxies[1]!.refuse()
  const answers: Array<{ kind: 'version' | 'jti'; token: string; status: number; what: string }> = []
  try {
    if ((await s.proxies[1]!.blackhole(':sub:')) === 0) throw new Error("node-1's subscriber connection was not found on its proxy")
    await waitFor('node-1 to stop vouching for its cache', () => ready(node1.url), { until: (ok) => !ok, timeoutMs: 15_000, everyMs: 20 })
    answers.push(
      ...(await Promise.all([
        ...invalidated.map(async (u, i) => ({ kind: 'version' as const, token: u.token, status: (await invalidate(node0.url, creds, u.userId)).status, what: `the token of missed-user-${i} from before its invalidation` })),
        ...revoked.map(async (u, i) => ({ kind: 'jti' as const, token: u.token, status: (await revokeToken(node0.url, creds, u.token)).status, what: `the token of missed-holder-${i} revoked alone` })),
      ])),
    )
  } finally {
    await s.proxies[1]!.accept()
  }
  await waitFor('node-1 to subscribe again and vouch for its cache', () => ready(node1.url), { timeoutMs: 30_000, everyMs: 20 })

  const done = answers.filter((a) => a.status === 200)
  log(`  missed-messages: ${done.length} of ${answers.length} writes answered 200 while node-1 had no subscription (${answers.filter((a) => a.status !== 200).map((a) => a.status).join(', ') || 'none refused'})`)
  for (const answer of done) {
    const statuses = await Promise.all(s.nodes.map((node) => verifyStatus(node.port, answer.token)))
    for (const [i, status] of statuses.entries()) {
      if (status === 0) continue
      p.checked()
      if (status === 200) p.violation(answer.kind, `node-${i} accepted ${answer.what} after node-1 caught up`)
    }
  }
  return p.result()
}
