import { performance } from 'node:perf_hooks'
import { jtiOf, verifyStatus } from '../http.js'
import type { Shape } from '../scenario.js'
import { holdSessions, sessionsOpen, watchStreams, writtenOn } from '../watch.js'
import { company, invalidate, revokeToken, tally, users, warm, type Kind, type Log, type ProbeResult } from './probe.js'

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
 * is injected: every node acknowledged, so any "yes, accepted / open / not written" is a
 * violation.
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
        { kind: 'version' as Kind, token: invalidated.token, held: heldInvalidated, what: `invalidation of after-ack-${round}-0`, write: () => invalidate(urls[round % 3]!, creds, invalidated.userId), key: (body: any) => `tokens.invalidated:${invalidated.userId}:${body?.newTokenVersion}` },
        { kind: 'jti' as Kind, token: revoked.token, held: heldRevoked, what: `revoke-token of after-ack-${round}-1`, write: () => revokeToken(urls[(round + 1) % 3]!, creds, revoked.token), key: () => `token.revoked:${jtiOf(revoked.token)}` },
      ]
      for (const w of writes) {
        const start = performance.now()
        const answer = await w.write()
        if (answer.status !== 200) {
          log(`  after-acknowledgement: the ${w.what} answered ${answer.status}`)
          continue
        }
        // A stream that reconnected meanwhile may have joined after the event: not asked.
        const streamed = streams.connectedSince(start)
        if (!streamed) log(`  after-acknowledgement: a stream was not connected throughout the ${w.what}: its event not checked`)
        const key = w.key(answer.body)
        await Promise.all(
          s.nodes.map(async (node, i) => {
            const [status, open, written] = await Promise.all([verifyStatus(node.port, w.token), sessionsOpen(node.url, w.held.filter((h) => h.node === i).map((h) => h.id)), streamed ? writtenOn(node.url, key) : undefined])
            if (status !== 0) {
              p.checked()
              if (status === 200) p.violation(w.kind, `node-${i} accepted the token right after the ${w.what} answered 200`)
            }
            if (open !== undefined) {
              p.checked()
              if (open.some(Boolean)) p.violation('session', `a session on node-${i} was still open right after the ${w.what} answered 200`)
            }
            if (written !== undefined) {
              p.checked()
              if (!written) p.violation('stream', `node-${i} had not written the event of the ${w.what} to its stream when it answered 200`)
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
