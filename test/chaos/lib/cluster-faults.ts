import { sleep, waitFor } from '../../support/poll.js'
import { partitionable, type ClusterSet } from '../../support/redis-cluster.js'
import type { ClusterScenario } from './cluster-scenario.js'
import type { Fault } from './faults.js'

/**
 * The cluster shape's faults (SPEC §11), each aimed at the master holding the bus's slot:
 * whatever one leaves behind (a killed master, a partition) is undone before the next, so
 * that each later fault still has three masters with a replica each.
 */

/** Resolves once the server on `port` sees itself as a replica (a former master rejoined). */
export async function untilReplica(cluster: ClusterSet, port: number, timeoutMs = 60_000): Promise<void> {
  const role = async () => String(((await (await cluster.client(port)).call('ROLE')) as unknown[])[0])
  await waitFor(`${port} to rejoin as a replica`, () => role().catch(() => 'unreachable'), { until: (r) => r === 'slave', timeoutMs, everyMs: 100 })
}

/** Closes the nodes' subscriber connections on the server at `port`; how many. */
export async function killSubscribers(cluster: ClusterSet, port: number): Promise<number> {
  const client = await cluster.client(port)
  return Number(await client.client('KILL', 'TYPE', 'pubsub'))
}

export const CLUSTER_FAULTS: Array<Fault<ClusterScenario>> = [
  {
    name: "CLUSTER FAILOVER of the bus slot's shard (its replica takes over)",
    run: async (s) => {
      await s.cluster.failover(s.slot, 60_000)
    },
  },
  {
    name: "CLIENT KILL TYPE pubsub on the bus slot's master",
    run: async (s) => {
      await killSubscribers(s.cluster, await s.cluster.ownerOf(s.slot))
    },
  },
  {
    name: "the bus slot's master killed (SIGKILL), its replica takes over; then it returns as a replica",
    run: async (s) => {
      const { killed } = await s.cluster.killOwner(s.slot, 60_000)
      await sleep(1000)
      await s.cluster.restart(killed)
      await untilReplica(s.cluster, killed)
    },
  },
  {
    name: "the bus slot's master cut off from the cluster while the nodes still reach it, until its replica is promoted",
    run: async (s) => {
      if (partitionable()) {
        // Its cluster bus dropped (iptables): it keeps serving the nodes while the others elect its replica.
        const { former, heal } = await s.cluster.partitionOwner(s.slot, 60_000)
        await sleep(1500)
        await heal()
        await untilReplica(s.cluster, former)
      } else {
        // No iptables here: stopped (SIGSTOP) while its replica takes over, then resumed still believing it holds the slot.
        await s.cluster.cutOffOwner(s.slot, { stoppedMs: 500, timeoutMs: 60_000 })
      }
    },
  },
  {
    name: "the bus's slot migrated to another master while invalidations run (its keys moved one batch at a time)",
    run: async (s) => {
      const owner = await s.cluster.ownerOf(s.slot)
      const to = (await s.cluster.masters()).find((port) => port !== owner)!
      await s.cluster.migrateSlot(s.slot, to, { betweenKeysMs: 100 })
    },
  },
]
