import { setTimeout as sleep } from 'node:timers/promises'
import { claimsOf, verifyStatus } from '../http.js'
import type { Scenario } from '../scenario.js'
import { company, forge, revokeToken, tally, users, type Log, type ProbeResult } from './probe.js'

/**
 * A token revoked just after its exp, with clocks that disagree (mutant
 * `retention-ignores-skew`): a revocation is kept until exp + JWT_CLOCK_TOLERANCE +
 * MAX_CLOCK_SKEW by PostgreSQL's clock, because a node whose clock lags still accepts the
 * token that long.
 *
 * Tokens of a real user are forged with an exp a few seconds ahead. Each is revoked
 * AFTER_EXP_MS after its exp by the machine's clock (PostgreSQL's; JWT_CLOCK_TOLERANCE is 0),
 * through the nodes in turn (node-2's clock, ahead, already calls it expired: the store
 * decides), and at once presented to every node. node-1's clock lags (1.5 s in the safe run,
 * 8 s in its mutant's, within MAX_CLOCK_SKEW): for it the token has not expired until that
 * long after its exp, so a node-1 that does not know it revoked accepts it.
 *
 * Why the mutant is caught every time: it keeps a revocation only until exp +
 * JWT_CLOCK_TOLERANCE by PostgreSQL's clock, so each of these revocations, written after
 * that, is found expired and nothing is written or announced; node-1, which still calls the
 * token live, accepts it when asked within its lag less AFTER_EXP_MS of the revocation —
 * 7.8 s in the mutant's run, far more than one revoke and one verification take on a busy
 * machine. Safe nodes keep the revocation (the whole skew as grace) and node-1 refuses it as
 * revoked.
 */
const TOKENS = 4
const LIFE_S = 3
const AFTER_EXP_MS = 200

export async function revokedPastExp(s: Scenario, log: Log): Promise<ProbeResult> {
  const p = tally('revoked-past-exp', log)
  const { creds } = await company(s, 'Past Exp Co')
  const [holder] = await users(s, creds, 'past-exp-holder', 1)
  const claims = claimsOf(holder!.token)
  const first = Math.ceil(Date.now() / 1000) + LIFE_S
  let revoked = 0
  await Promise.all(
    Array.from({ length: TOKENS }, async (_, k) => {
      const exp = first + k
      const token = forge(claims, crypto.randomUUID(), exp)
      await sleep(Math.max(0, exp * 1000 + AFTER_EXP_MS - Date.now()))
      const answer = await revokeToken(s.nodes[k % s.nodes.length]!.url, creds, token)
      if (answer.status !== 200) return
      revoked++
      const statuses = await Promise.all(s.nodes.map((node) => verifyStatus(node.port, token)))
      const late = Date.now() - exp * 1000
      for (const [i, status] of statuses.entries()) {
        if (status === 0) continue
        p.checked()
        if (status === 200) p.violation('jti', `node-${i} accepted a token revoked ${AFTER_EXP_MS} ms after its exp, ${late} ms after its exp by the machine's clock`)
      }
    }),
  )
  log(`  revoked-past-exp: ${revoked} of ${TOKENS} revocations answered 200`)
  return p.result()
}
