import type { Redis } from 'ioredis'
import { sleep, waitFor } from '../../../support/poll.js'
import type { ClusterSet } from '../../../support/redis-cluster.js'
import type { ClusterScenario } from '../cluster-scenario.js'
import { LEASE_MS } from '../scenario.js'
import { ready } from '../http.js'
import { company, tally, users, warm, type Log, type ProbeResult } from './probe.js'
import { invalidateThroughEachNode } from './through-each-node.js'

/**
 * The bus's slot leaves its master and comes back (mutant `ignores-slot-left`): Redis 7.0
 * drops a shard subscriber's subscription itself when the slot leaves its server (an
 * unrequested SUNSUBSCRIBE); the node's subscriber gives such a connection up, and its next
 * one goes to the slot's master.
 *
 * The three nodes are stopped (SIGSTOP, as a long pause would), and the slot is migrated
 * from its master P to another master Q and straight back, with its keys, then the whole
 * cluster is told P holds it: P holds the slot again, at a new config epoch. Stopped, no
 * node could follow the slot to Q and back (a watch that saw Q would move it, by another
 * rule); resumed, each finds the unsubscriptions waiting on its connection to P, and P
 * still answering its PINGs and taking its registration. Once every node vouches for its
 * cache again (the new epoch started its caches over), each caches users, which are then
 * invalidated through each node in turn, the old token presented to every node the moment
 * each write answers 200 and once more a second later.
 *
 * Why the mutant is caught every time: P unsubscribed every node when the slot left it. A
 * node that ignores that keeps its connection, whose PINGs P still answers, so its lease
 * goes on while no message reaches it — the watch names P, the server it is connected to,
 * and its registration is on P too: nothing else tells it. A write answers 200 once the
 * silent nodes' lease has run out unanswered, but they never stop trusting, and keep the user
 * at its old version until they next read the change log (every 30 s for the mutant). Safe
 * nodes give up the unsubscribed connection and subscribe on P again before they vouch.
 */
const PER_NODE = 2

/** Moves the slot's keys from `from` to `to` (the slot MIGRATING on one, IMPORTING on the other). */
async function moveKeys(from: Redis, slot: number, toHost: string, toPort: number): Promise<void> {
  for (;;) {
    const keys = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 100)) as string[]
    if (keys.length === 0) return
    await from.call('MIGRATE', toHost, toPort, '', 0, 5000, 'KEYS', ...keys)
  }
}

/** The slot from P to Q and back, with its keys, told to those two only; then every other node is told P holds it. */
async function bounce(cluster: ClusterSet, slot: number, p: number, q: number): Promise<void> {
  const ids = new Map(
    String(await (await cluster.client(p)).call('CLUSTER', 'NODES'))
      .trim()
      .split('\n')
      .map((line) => line.split(' '))
      .map((f) => [Number(f[1]!.split('@')[0]!.split(':').at(-1)), f[0]!] as const),
  )
  const [P, Q] = [await cluster.client(p), await cluster.client(q)]
  const [pHost, qHost] = [cluster.hosts.get(p)!, cluster.hosts.get(q)!]
  await Q.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids.get(p)!)
  await P.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids.get(q)!)
  await moveKeys(P, slot, qHost, q)
  await Q.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(q)!)
  await P.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(q)!)
  // back at once
  await P.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids.get(q)!)
  await Q.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids.get(p)!)
  await moveKeys(Q, slot, pHost, p)
  await P.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(p)!)
  await Q.call('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(p)!)
  for (const port of cluster.ports) if (port !== p && port !== q) await (await cluster.client(port)).call('CLUSTER', 'SETSLOT', slot, 'NODE', ids.get(p)!).catch(() => {})
}

/**
 * P's config epoch once every node's view agrees on it and no other master shares it: P and
 * Q each took the slot at an epoch of their own making, and may have made the same one, which
 * the cluster settles later by bumping one of them (the nodes' watches would then see a new
 * epoch, and start their caches over, in the middle of the probe).
 */
async function settledEpoch(cluster: ClusterSet, p: number): Promise<string | undefined> {
  const epochs = await Promise.all(
    cluster.ports.map(async (port) => {
      const lines = String(await (await cluster.client(port)).call('CLUSTER', 'NODES').catch(() => ''))
        .split('\n')
        .map((l) => l.split(' '))
        .filter((f) => f.length >= 8)
      const mine = lines.find((f) => Number(f[1]!.split('@')[0]!.split(':').at(-1)) === p)
      const shared = lines.some((f) => f !== mine && f[2]!.includes('master') && f[6] === mine?.[6])
      return mine === undefined || shared ? undefined : mine[6]
    }),
  )
  return epochs.every((e) => e !== undefined && e === epochs[0]) ? epochs[0] : undefined
}

/** The nodes' subscriber connections on the server at `port`, and how many of them are still subscribed to something. */
async function subscribersOn(cluster: ClusterSet, port: number): Promise<{ connections: number; subscribed: number }> {
  const lines = ((await (await cluster.client(port)).client('LIST')) as string).split('\n').filter((l) => /:sub:/.test(l))
  return { connections: lines.length, subscribed: lines.filter((l) => !/ ssub=0\b/.test(l)).length }
}

export async function slotBounce(s: ClusterScenario, log: Log): Promise<ProbeResult> {
  const p = tally('slot-bounce', log)
  const { creds } = await company(s, 'Slot Bounce Co')
  const members = await users(s, creds, 'bounce-user', PER_NODE * s.nodes.length)
  await warm(s, []) // every node vouches: subscribed on the slot's master

  const owner = await s.cluster.ownerOf(s.slot)
  const other = (await s.cluster.masters()).find((port) => port !== owner)!
  for (const node of s.nodes) node.pause()
  let tookMs: number
  const started = performance.now()
  try {
    await bounce(s.cluster, s.slot, owner, other)
    tookMs = Math.round(performance.now() - started)
    await waitFor(`every node of the cluster to name ${owner} at one epoch of its own`, () => settledEpoch(s.cluster, owner), { until: (e) => e !== undefined, timeoutMs: 30_000, everyMs: 50 })
    if ((await s.cluster.ownerOf(s.slot)) !== owner) throw new Error(`the slot did not come back to ${owner}`)
    // Stopped for longer than a lease: no answer a node's watch had before vouches for anything
    // once it resumes, so it vouches again only on answers naming P at its settled epoch.
    await sleep(Math.max(0, started + 3 * LEASE_MS - performance.now()))
  } finally {
    for (const node of s.nodes) node.resume()
  }
  // The nodes' watches name P at a new config epoch: a new epoch on each, whose caches start over.
  await Promise.all(s.nodes.map((node) => waitFor(`${node.name} to vouch for its cache after the bounce`, () => ready(node.url), { timeoutMs: 30_000, everyMs: 20 })))
  const subs = await subscribersOn(s.cluster, owner)
  log(`  slot-bounce: the slot went ${owner} → ${other} → ${owner} in ${tookMs} ms while the nodes were stopped; on ${owner} now ${subs.connections} subscriber connection(s), ${subs.subscribed} of them subscribed`)
  await warm(s, members.map((m) => m.token))
  const outcomes = await invalidateThroughEachNode(s, p, creds, members, 'bounce-user')
  log(`  slot-bounce: the writes answered: ${outcomes.join(', ')}`)
  return p.result()
}
