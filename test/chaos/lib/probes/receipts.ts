import { admin } from '../../../support/http-client.js'
import { verifyStatus } from '../http.js'
import type { Scenario } from '../scenario.js'
import { company, tally, users, warm, type Log, type ProbeResult } from './probe.js'

/**
 * Receipts are true (SPEC §10.2): a revocation's receipt lists every node registered when
 * the change went out, and a node it lists as acknowledged has applied the change (mutants
 * `receipt-claims-every-node`, `receipt-leaves-out-unacknowledged`: the receipt the bus
 * hands to the admin API).
 *
 * Each round warms every node's cache with a fresh user's token and invalidates that user
 * through the admin API of one node (the writer, each node in turn). On every other round
 * one other node is cut off first: its proxy refuses new connections and stalls its
 * subscriber (it keeps its registration, renewed on its command connection, but can receive
 * no change). The moment the write answers 200 the old token is shown to every node, side
 * by side, and the receipt is held against what the probe knows:
 * - every node of the run is listed (each is live and registered; a node's id is the prefix
 *   of the change ids its own writes answer with);
 * - a node listed as acknowledged refuses the old token (one that accepts it had not applied
 *   the change: a `receipt` violation; any other node accepting it is a `version` one);
 * - the cut-off node is not listed as acknowledged: it could not have received the change;
 * - `acknowledged` comes with an acknowledgement from every node it lists.
 *
 * Why each mutant is caught every time: `receipt-claims-every-node` answers before the acks
 * with every registered node listed as acknowledged. The cut-off node, listed, cannot have
 * acknowledged; and its run gives the nodes a long lease (mutants.test.ts), so that node
 * still trusts its cache and accepts the old token when asked right after the 200.
 * `receipt-leaves-out-unacknowledged` lists only the nodes that acknowledged: the cut-off
 * node, live and registered, is missing. Three rounds cut a node off, each its own finding.
 */
const ROUNDS = 6

interface Line {
  nodeId: string
  ackedAfterMs: number | null
  sessionsEnded: number | null
}

interface Round {
  what: string
  writer: number
  cut: number | undefined
  receipt: { changeId: string; outcome: string; nodes: Line[] }
  /** the old token's verification on each node right after the 200 (0: no answer) */
  statuses: number[]
}

export async function receiptsHold(s: Scenario, log: Log): Promise<ProbeResult> {
  const p = tally('receipts', log)
  const { creds } = await company(s, 'Receipts Co')
  const rounds: Round[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const writer = round % s.nodes.length
    const [user] = (await users(s, creds, `receipts-${round}`, 1)) as [{ token: string; userId: string }]
    await warm(s, [user.token])
    const cut = round % 2 === 0 ? await cutOff(s, (writer + 1) % s.nodes.length, log) : undefined
    try {
      const answer = await admin(s.nodes[writer]!.url, 'POST', `/admin/v1/customer-users/${user.userId}/invalidate`).catch(() => ({ status: 0, body: undefined }))
      if (answer.status !== 200) {
        log(`  receipts: the invalidation of receipts-${round} answered ${answer.status}`)
        continue
      }
      const statuses = await Promise.all(s.nodes.map((node) => verifyStatus(node.port, user.token)))
      p.checked()
      if (!Array.isArray(answer.body?.receipt?.nodes)) {
        p.violation('receipt', `the invalidation of receipts-${round} answered 200 with no receipt`)
        continue
      }
      const receipt = answer.body.receipt as Round['receipt']
      log(`  receipts: round ${round} through node-${writer}${cut === undefined ? '' : `, node-${cut} cut off`}: ${receipt.outcome}, ${receipt.nodes.filter((line) => line.ackedAfterMs !== null).length} of ${receipt.nodes.length} listed nodes acknowledged; verified ${statuses.join(', ')}`)
      rounds.push({ what: `the invalidation of receipts-${round} through node-${writer}`, writer, cut, receipt, statuses })
    } finally {
      if (cut !== undefined) await Promise.all([s.proxies[cut]!.resume(), s.proxies[cut]!.accept()])
    }
  }

  const ids = nodeIds(rounds, s.nodes.length)
  log(`  receipts: ${rounds.length} of ${ROUNDS} invalidations answered 200; ${rounds.filter((r) => r.cut !== undefined).length} with a node cut off; node ids ${ids.map((id, i) => `node-${i}=${id ?? '?'}`).join(' ')}`)
  for (const r of rounds) {
    const listed = new Map(r.receipt.nodes.map((line) => [line.nodeId, line]))
    const acked = (i: number) => listed.get(ids[i]!)?.ackedAfterMs != null
    for (const [i, id] of ids.entries()) {
      if (id === undefined) continue
      p.checked()
      if (!listed.has(id)) p.violation('receipt', `node-${i}, live and registered, is missing from the receipt of ${r.what}`)
    }
    for (const [i, status] of r.statuses.entries()) {
      if (status === 0 || ids[i] === undefined) continue
      p.checked()
      if (status !== 200) continue
      if (acked(i)) p.violation('receipt', `node-${i}, listed as acknowledged (${listed.get(ids[i]!)!.ackedAfterMs} ms), accepted the old token right after ${r.what} answered 200`)
      else p.violation('version', `node-${i} accepted the old token right after ${r.what} answered 200`)
    }
    if (r.cut !== undefined && ids[r.cut] !== undefined) {
      p.checked()
      if (acked(r.cut)) p.violation('receipt', `node-${r.cut}, cut off from every change, is listed as acknowledged in the receipt of ${r.what}`)
    }
    p.checked()
    if (r.receipt.outcome === 'acknowledged' && r.receipt.nodes.some((line) => line.ackedAfterMs === null)) p.violation('receipt', `the receipt of ${r.what} says acknowledged with a node that did not acknowledge`)
  }
  return p.result()
}

/**
 * Node `i` refuses new connections to Redis and its subscriber stalls: until `resume` and
 * `accept`, no change reaches it. Undefined when its subscriber was not found (then nothing
 * is cut off, and the round is an ordinary one).
 */
async function cutOff(s: Scenario, i: number, log: Log): Promise<number | undefined> {
  const proxy = s.proxies[i]!
  await proxy.refuse()
  if ((await proxy.stall(':sub:')) > 0) return i
  await proxy.accept()
  log(`  receipts: node-${i}'s subscriber connection was not found on its proxy; not cut off`)
  return undefined
}

/** Each node's id, from the change ids of the writes it answered (`<node id>.<n>`); undefined for a node that answered none. */
function nodeIds(rounds: Round[], count: number): Array<string | undefined> {
  const ids = Array.from({ length: count }, (): string | undefined => undefined)
  for (const r of rounds) {
    const id = String(r.receipt.changeId).split('.')[0]!
    if (ids[r.writer] !== undefined && ids[r.writer] !== id) throw new Error(`node-${r.writer} answered with change ids of two nodes (${ids[r.writer]}, ${id}): did it restart?`)
    ids[r.writer] = id
  }
  return ids
}
