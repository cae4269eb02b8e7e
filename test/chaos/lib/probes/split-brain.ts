import { waitFor } from '../../../support/poll.js'
import { splitBrain } from '../faults.js'
import type { SentinelScenario } from '../scenario.js'
import { company, tally, users, warm, type Log, type ProbeResult } from './probe.js'
import { invalidateThroughEachNode } from './through-each-node.js'

/**
 * A split brain under Redis Sentinel (mutant `no-primary-check`): a node trusts its cache
 * only while a majority of sentinels names the server it is subscribed to, and a writer
 * confirms the server that took its publish is that primary.
 *
 * Every node caches users. Then the split is forced on purpose: SENTINEL FAILOVER, and one
 * node's connections to the old primary closed, so that it reconnects (asking the sentinels)
 * to the new primary while the others are still on the old one, which serves them until
 * Sentinel demotes it (seconds: only after its INFO has shown it a primary for 8 s). Inside
 * that window users are invalidated through each node in turn, and the moment each write
 * answers 200 — and once more a second later — the old token is presented to every node.
 *
 * Why the mutant is caught every time: its nodes never ask the sentinels, so the two sides
 * each keep trusting their own server. A write on either side answers 200 once the other
 * side's nodes (still in its server's registry, replicated before the failover) have let
 * their lease run out unanswered — but those nodes never stop trusting: their own server
 * still answers their PINGs. They keep the user at its old version until they next read the
 * change log, which the mutant makes rare (30 s instead of every second) so that the window
 * the vouching closes stays open for the whole probe instead of one second. Each write
 * therefore leaves old tokens accepted on the other side's nodes, and both sides are
 * written through. Safe nodes stop trusting the old primary as soon as the sentinels name
 * another, and a write through one refuses with 503.
 */
const PER_NODE = 2

export async function splitBrainWrites(s: SentinelScenario, log: Log): Promise<ProbeResult> {
  const p = tally('split-brain', log)
  const { creds } = await company(s, 'Split Brain Co')
  const members = await users(s, creds, 'split-user', PER_NODE * s.nodes.length)
  await warm(s, members.map((m) => m.token))

  const { oldPrimary, moved } = await splitBrain(s.set)
  if (moved === undefined) throw new Error('no node was subscribed on the old primary')
  const newPrimary = s.set.dataPorts.find((port) => port !== oldPrimary)!
  await waitFor(`the moved node (${moved}) to subscribe on the new primary`, async () => String(await (await s.set.client(newPrimary)).client('LIST')), { until: (list) => list.includes(`:sub:${moved}`), timeoutMs: 15_000, everyMs: 20 })
  const role = async () => ((await (await s.set.client(oldPrimary)).call('ROLE')) as unknown[])[0]
  const splitAtStart = await role()

  const outcomes = await invalidateThroughEachNode(s, p, creds, members, 'split-user')
  log(`  split-brain: the old primary was a ${splitAtStart} when the writes began and a ${await role()} after the checks; the writes answered: ${outcomes.join(', ')}`)
  return p.result()
}
