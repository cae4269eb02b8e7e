import t from 'tap'
import { check } from './lib/checks.js'
import { CLUSTER_FAULTS } from './lib/cluster-faults.js'
import { clusterServices, setUpCluster, tearDownCluster, type ClusterScenario } from './lib/cluster-scenario.js'
import { drive } from './lib/driver.js'
import { selected } from './lib/faults.js'
import { mutantCalls, type Mutant } from './lib/nodes.js'
import { clusterPartition } from './lib/probes/cluster-partition.js'
import type { Log, ProbeResult } from './lib/probes/probe.js'
import { slotBounce } from './lib/probes/slot-bounce.js'
import { partitionable } from '../support/redis-cluster.js'
import { missing } from '../setup/tools.js'

/**
 * `npm run test:chaos`: the cluster shape (SPEC §11; lib/cluster-scenario.ts: a Redis
 * Cluster of three masters with a replica each, PostgreSQL, three nodes on
 * REDIS_CLUSTER_NODES). The general load (lib/driver.ts) runs through the faults of
 * lib/cluster-faults.ts — a manual failover of the bus slot's shard, the nodes' subscribers
 * killed, its master killed and back, cut off from the cluster, the slot migrated — and must
 * find no violation; then the cluster's probes find none either. Each probe finds violations
 * every time on the nodes of its mutant (lib/mutants.mjs), each with its cluster of its own.
 */
const services = clusterServices(t)

/** The partition cuts a master off the cluster's bus with iptables (the cluster faults stop it with SIGSTOP instead when they cannot). */
const cannotPartition = missing('iptables') || (partitionable() ? false : 'cutting a node off the cluster bus needs iptables to work here, as root')

const PROBES: Array<{ probe: (s: ClusterScenario, log: Log) => Promise<ProbeResult>; mutant: Mutant; what: string; skip?: string | false }> = [
  { probe: clusterPartition, mutant: 'no-cluster-watch', what: "with the bus slot's master not checked with a majority of the cluster", skip: cannotPartition },
  { probe: slotBounce, mutant: 'ignores-slot-left', what: 'with a subscriber that ignores its server dropping the subscription when the slot leaves it' },
]

t.test('cluster shape', async (t) => {
  const s = await setUpCluster(services, await services.createDatabase('chaos_cluster'), undefined)
  t.teardown(() => tearDownCluster(s))

  await t.test('through failovers, a kill, a partition and a slot migration, no node accepts a token whose invalidation had answered', async (t) => {
    const faults = selected(CLUSTER_FAULTS, 'CHAOS_CLUSTER_FAULTS')
    const log = (line: string) => t.comment(line)
    const result = check(await drive(s, faults, log, { sampleReadiness: true }), log)
    t.equal(result.faults, faults.length, 'every fault was injected')
    t.ok(result.invalidationsOk > 100 && result.accepted > 1000, `the load did run (${result.invalidationsOk} invalidations, ${result.accepted} verifications accepted)`)
    t.ok(result.sessions.checked > 20, `sessions ended by revocations were checked (${result.sessions.checked})`)
    t.equal(result.byKind.version + result.byKind.jti + result.byKind.company, 0, 'no revoked token accepted')
    t.equal(result.byKind.session, 0, `sessions still open after the revocation that ended them answered: ${result.byKind.session}`)
    t.equal(result.violations, 0, `violations: ${result.violations}`)
  })

  for (const { probe, skip } of PROBES) {
    await t.test(`the probe ${probe.name} finds no violation`, { skip: skip ?? false }, async (t) => {
      const result = await probe(s, (line) => t.comment(line))
      t.ok(result.checked > 0, `it checked something (${result.checked})`)
      t.equal(result.violations, 0, `violations: ${result.violations}`)
    })
  }
})

for (const { probe, mutant, what, skip } of PROBES) {
  t.test(`the checker bites on a cluster: ${what}, violations appear`, { skip: skip ?? false }, async (t) => {
    const s = await setUpCluster(services, await services.createDatabase('chaos_cluster_mutant'), mutant)
    t.teardown(() => tearDownCluster(s))
    const result = await probe(s, (line) => t.comment(line))
    t.ok(result.checked > 0, `the probe ${result.name} checked something (${result.checked})`)
    t.ok((await mutantCalls(s.nodes, (line) => t.comment(line))) > 0, `the mutant (test/chaos/lib/mutants.mjs ${mutant}) reached the nodes' parts`)
    t.ok(result.violations > 0, `the probe ${result.name} finds violations (${result.violations})`)
  })
}
