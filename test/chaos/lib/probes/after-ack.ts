import { performance } from 'node:perf_hooks'
import { jtiOf, verifyStatus } from '../http.js'
import type { Shape } from '../scenario.js'
import { holdSessions, SESSION_BOUND_MS, sessionsOpen, watchStreams, writtenOn } from '../watch.js'
import { company, everyNodeAcked, invalidate, openAfterBound, publishes, revokeToken, tally, users, warm, writtenWithin, type Kind, type Log, type ProbeResult } from './probe.js'

/**
 * Right after the acknowledgement: when a revocation answers 200, every node has applied it —
 * its caches refuse the token, the sessions it ends are aborted, its events are on the
 * node's streams (mutants `caches-after-acknowledgement`, `acks-before-sessions`,
 * `acks-before-stream-writes`: the change pipeline's order, change-pipeline.ts).
 *
 * An event stream of the company is held on every node, and each round warms every node's
 * cache with two users' tokens and holds a session with each on every node. Then one user is
 * invalidated through one node and the other's token revoked alone through another; the
 * moment each write answers 200, every node is asked, side by side: is the old token still
 * accepted, is the session still open, was the write's event handed to the stream? No fault
 * is injected: when every node acknowledged (the writer's chat_auth_bus_publishes_total
 * says so), any "accepted / open / not written" is a violation. When a node of a busy
 * machine acknowledged too late, the writer answered once its lease ran out; that node reads
 * the store for its verifications (still checked at once), and its sessions and events are
 * held to the documented bounds (docs/live-revocation.md) instead, as the general load's checker does near a fault.
 *
 * Why each mutant is caught every time: each acknowledges a change before one step has run —
 * the caches step (run 0.4 lease after the others), or the sessions step, or the streams step
 * (their store reads take 0.4 lease, and the acknowledgement does not wait for them). Its
 * mutant run gives the nodes a long lease (mutants.test.ts) so that this is over a second:
 * the questions, asked at once after the 200, reach the nodes well within it, on three nodes
 * for each of several writes. 0.4 lease stays within the half lease a correct node may take
 * to acknowledge, so that a correct node as slow would still acknowledge in time and be seen
 * as correct: what is caught is the order, not the slowness.
 */
const ROUNDS = 3

export async function afterAcknowledgement(s: Shape, log: Log): Promise<ProbeResult> {
  const p = tally('after-acknowledgement', log)
  const urls = s.nodes.map((n) => n.url)
  const { creds } = await company(s, 'After Ack Co')
  const streams = await watchStreams(urls, creds)
  const sessions = holdSessions(urls)
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const [invalidated, revoked] = (await users(s, creds, `after-ack-${round}`, 2)) as [{ token: string; userId: string }, { token: string; userId: string }]
      await warm(s, [invalidated.token, revoked.token])
      const heldInvalidated = await sessions.openEverywhere(invalidated.token)
      const heldRevoked = await sessions.openEverywhere(revoked.token)
      if (heldInvalidated.length + heldRevoked.length < 2 * s.nodes.length) throw new Error(`sessions refused: ${[...sessions.refusedCodes].join(', ')}`)
      const writes = [
        { kind: 'version' as Kind, token: invalidated.token, held: heldInvalidated, what: `invalidation of after-ack-${round}-0`, via: round % 3, write: (url: string) => invalidate(url, creds, invalidated.userId), key: (body: any) => `tokens.invalidated:${invalidated.userId}:${body?.newTokenVersion}` },
        { kind: 'jti' as Kind, token: revoked.token, held: heldRevoked, what: `revoke-token of after-ack-${round}-1`, via: (round + 1) % 3, write: (url: string) => revokeToken(url, creds, revoked.token), key: () => `token.revoked:${jtiOf(revoked.token)}` },
      ]
      for (const w of writes) {
        const writer = urls[w.via]!
        const before = await publishes(writer)
        const start = performance.now()
        const answer = await w.write(writer)
        if (answer.status !== 200) {
          log(`  after-acknowledgement: the ${w.what} answered ${answer.status}`)
          continue
        }
        // A stream that reconnected meanwhile may have joined after the event: not asked.
        const streamed = streams.connectedSince(start)
        const key = w.key(answer.body)
        // Asked at once, side by side; whether every node acknowledged is read beside them.
        const [after, answers] = await Promise.all([
          publishes(writer),
          Promise.all(s.nodes.map((node, i) => Promise.all([verifyStatus(node.port, w.token), sessionsOpen(node.url, w.held.filter((h) => h.node === i).map((h) => h.id)), streamed ? writtenOn(node.url, key) : undefined]))),
        ])
        const acked = everyNodeAcked(before, after)
        if (!acked) log(`  after-acknowledgement: not every node acknowledged the ${w.what} in time: sessions and events checked against the documented bounds (docs/live-revocation.md)`)
        await Promise.all(
          answers.map(async ([status, open, written], i) => {
            const node = s.nodes[i]!
            if (status !== 0) {
              p.checked()
              if (status === 200) p.violation(w.kind, `node-${i} accepted the token right after the ${w.what} answered 200`)
            }
            if (open !== undefined) {
              p.checked()
              const ids = w.held.filter((h) => h.node === i).map((h) => h.id).filter((_, k) => open[k])
              const still = ids.length === 0 ? 0 : acked ? ids.length : await openAfterBound(node.url, ids)
              if (still) p.violation('session', `a session on node-${i} was still open ${acked ? 'right after' : `${SESSION_BOUND_MS} ms after`} the ${w.what} answered 200`)
            }
            if (written !== undefined) {
              p.checked()
              if (!written && (acked || !(await writtenWithin(node.url, key)))) p.violation('stream', `node-${i} had not written the event of the ${w.what} to its stream ${acked ? 'when it answered 200' : 'within the bound'}`)
            }
          }),
        )
      }
    }
  } finally {
    await streams.stop()
  }
  return p.result()
}
