import { setTimeout as sleep } from 'node:timers/promises'
import type { Credentials } from '../http.js'
import { verifyStatus } from '../http.js'
import type { Shape } from '../scenario.js'
import { invalidate, type tally } from './probe.js'

/**
 * The writes of the split-brain probes: each member invalidated through the nodes in turn,
 * its old token presented to every node the moment the write answers 200 and once more a
 * second after the last one; each acceptance a violation. The writes' answers, for the log.
 */
export async function invalidateThroughEachNode(s: Shape, p: ReturnType<typeof tally>, creds: Credentials, members: Array<{ token: string; userId: string }>, label: string): Promise<string[]> {
  const present = async (token: string, what: string) => {
    const statuses = await Promise.all(s.nodes.map((node) => verifyStatus(node.port, token)))
    for (const [i, status] of statuses.entries()) {
      if (status === 0) continue
      p.checked()
      if (status === 200) p.violation('version', `node-${i} accepted the token of ${what}`)
    }
  }
  const written: Array<{ token: string; what: string }> = []
  const outcomes: string[] = []
  for (const [k, member] of members.entries()) {
    const writer = k % s.nodes.length
    const answer = await invalidate(s.nodes[writer]!.url, creds, member.userId)
    outcomes.push(`node-${writer} ${answer.status}`)
    if (answer.status !== 200) continue
    const what = `${label}-${k} from before its invalidation through node-${writer}`
    written.push({ token: member.token, what })
    await present(member.token, `${what}, right after it answered 200`)
  }
  await sleep(1000)
  for (const { token, what } of written) await present(token, `${what}, a second after it answered 200`)
  return outcomes
}
