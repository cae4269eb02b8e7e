import { waitFor } from '../../../support/poll.js'
import type { ClusterSet } from '../../../support/redis-cluster.js'
import { untilReplica } from '../cluster-faults.js'
import type { ClusterScenario } from '../cluster-scenario.js'
import { company, tally, users, warm, type Log, type ProbeResult } from './probe.js'
import { invalidateThroughEachNode } from './through-each-node.js'

/**
 * A split brain on a Redis Cluster (mutant `no-cluster-watch`): a node trusts its cache only
 * while a majority of the cluster's nodes names the master its subscriber is on as the
 * holder of the bus's slot, leaves a master they no longer name, and a writer confirms the
 * server that took its publish is that master.
 *
 * The bus slot's master P is cut off from the rest of the
 * cluster (its cluster bus dropped) while the nodes still reach it, and its
 * cluster-node-timeout is raised first, so that P, slow to notice it is alone, keeps taking
 * the nodes' writes for the whole probe instead of for a second — as a master does that has
 * not noticed yet. The others fail it over to its replica R. One node's connections on P are
 * closed, so that it reconnects to R (where a majority of the cluster now says the slot is),
 * while the others stay on P. Every node caches users; they are then invalidated through each node in turn, and the
 * moment each write answers 200 — and once more a second later — the old token is presented
 * to every node.
 *
 * Why the mutant is caught every time: its nodes never ask the majority, so the two sides
 * each keep trusting their own master. A write on either side answers 200 once the other
 * side's nodes (in its master's registry, replicated before the cut) have let their lease
 * run out unanswered — but those nodes never stop trusting: their own master still answers
 * their PINGs and takes their registrations. They keep the user at its old version until they
 * next read the change log, which the mutant makes rare (30 s). Safe nodes leave P as soon
 * as the majority names R; a node still on P does not vouch for its cache, and a write
 * through it is not confirmed (503).
 */
const PER_NODE = 2
/** P's cluster-node-timeout during the probe: it does not notice it is alone before the probe ends. */
const SLOW_TIMEOUT_MS = 120_000

/** Closes every connection of the node `nodeId` (the first subscriber listed, when undefined) on the server at `port`; that node's bus id. */
async function closeNodesConnections(cluster: ClusterSet, port: number, nodeId?: string): Promise<string | undefined> {
  const client = await cluster.client(port)
  const list = ((await client.client('LIST')) as string).split('\n')
  const id = nodeId ?? list.map((l) => / name=[^ ]*:sub:([0-9a-f]+)/.exec(l)?.[1]).find((found) => found !== undefined)
  if (id === undefined) return undefined
  for (const line of list.filter((l) => l.includes(`:${id} `))) await client.client('KILL', 'ID', line.match(/\bid=(\d+)/)![1]!).catch(() => {})
  return id
}

/**
 * Moves one node still on the former master to the new one: its connections there are
 * closed until it reconnects on the new master (a node whose watch has not yet seen the
 * majority move reconnects to the former one). Its bus id; undefined when no node was left there.
 */
async function moveOneNode(cluster: ClusterSet, former: number, owner: number): Promise<string | undefined> {
  const moved = await closeNodesConnections(cluster, former)
  if (moved === undefined) return undefined
  const on = async (port: number) => String(await (await cluster.client(port)).client('LIST')).includes(`:sub:${moved}`)
  await waitFor(
    `the moved node (${moved}) to subscribe on the new master`,
    async () => (await on(owner)) || ((await on(former)) && (await closeNodesConnections(cluster, former, moved)) === undefined),
    { until: (yes) => yes, timeoutMs: 30_000, everyMs: 100 },
  )
  return moved
}

export async function clusterPartition(s: ClusterScenario, log: Log): Promise<ProbeResult> {
  const p = tally('cluster-partition', log)
  const { creds } = await company(s, 'Cluster Partition Co')
  const members = await users(s, creds, 'partition-user', PER_NODE * s.nodes.length)

  const former = await s.cluster.ownerOf(s.slot)
  const formerClient = await s.cluster.client(former)
  const timeout = ((await formerClient.config('GET', 'cluster-node-timeout')) as string[])[1]!
  await formerClient.config('SET', 'cluster-node-timeout', String(SLOW_TIMEOUT_MS))
  let partition: Awaited<ReturnType<ClusterSet['partitionOwner']>> | undefined
  try {
    partition = await s.cluster.partitionOwner(s.slot, 60_000)
    const { owner } = partition
    const moved = await moveOneNode(s.cluster, former, owner)
    const stayed = ((await formerClient.client('LIST')) as string).split('\n').filter((l) => /:sub:/.test(l)).length
    log(`  cluster-partition: ${former} cut off, ${owner} took the slot; ${moved === undefined ? 'no node was left on the former master' : `one node moved to ${owner}`}, ${stayed} subscriber(s) still on ${former}`)
    // Cached now: a node's caches start again when the master the majority names changes.
    await warm(s, members.map((m) => m.token))
    const outcomes = await invalidateThroughEachNode(s, p, creds, members, 'partition-user')
    log(`  cluster-partition: the writes answered: ${outcomes.join(', ')}`)
  } finally {
    await formerClient.config('SET', 'cluster-node-timeout', timeout).catch(() => {})
    await partition?.heal()
  }
  await untilReplica(s.cluster, former)
  return p.result()
}
