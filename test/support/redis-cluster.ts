import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { sleep, waitFor } from './poll.js'
import { freePort } from './ports.js'
import { spawnProcess, type ChildHandle } from './processes.js'

/**
 * A real Redis Cluster of three masters with a replica each, from the local redis-server,
 * on free ports, in a temporary folder removed afterwards (SPEC §11's tests and the chaos
 * run's cluster shape). Short timings for a test: a node is failing after 1 s without an
 * answer, and any replica may take over whatever its replication lag.
 */
export interface ClusterSet {
  readonly ports: readonly number[]
  /** each node's own loopback address (127.0.0.x), by port: a node cut off is told apart by it */
  readonly hosts: ReadonlyMap<number, string>
  /** REDIS_CLUSTER_NODES for a node: every node of the cluster */
  readonly nodesEnv: string
  /** the address a node of the cluster is reached at (`host:port`, as CLUSTER NODES names it) */
  addressOf(port: number): string
  /** a plain client on one node, for faults and checks */
  client(port: number): Promise<Redis>
  /** the hash slot of a key (CLUSTER KEYSLOT) */
  slotOf(key: string): Promise<number>
  /** the port of the master serving `slot`, once every reachable node agrees on it */
  ownerOf(slot: number, timeoutMs?: number): Promise<number>
  /** the port of a replica of the master on `port` */
  replicaOf(port: number): Promise<number>
  /** CLUSTER FAILOVER on a replica of the slot's master; the new master's port once every node names it */
  failover(slot: number, timeoutMs?: number): Promise<number>
  /** SIGKILL of the slot's master; the port of the replica that took over, once every live node names it */
  killOwner(slot: number, timeoutMs?: number): Promise<{ killed: number; owner: number }>
  /**
   * The slot's master cut off: stopped (SIGSTOP) while its replica takes over
   * (CLUSTER FAILOVER TAKEOVER), then resumed: for a moment it still believes it holds the
   * slot and accepts writes, until the others' messages demote it. Resolves with both ports
   * once it has been demoted.
   */
  cutOffOwner(slot: number, options?: { stoppedMs?: number; timeoutMs?: number }): Promise<{ former: number; owner: number }>
  /**
   * The slot's master cut off from the other nodes of the cluster (its cluster bus dropped
   * both ways with iptables), while clients still reach it: it keeps serving them (and
   * taking writes, until it notices it is alone) while the others fail it over. Resolves
   * once the others name its replica; `heal()` ends the partition (it then rejoins as a
   * replica). Needs iptables and root (`partitionable()` says whether this machine has them).
   */
  partitionOwner(slot: number, timeoutMs?: number): Promise<{ former: number; owner: number; heal(): Promise<void> }>
  /** moves the slot, with its keys, to the master on `toPort` (CLUSTER SETSLOT … IMPORTING/MIGRATING/NODE, MIGRATE) */
  migrateSlot(slot: number, toPort: number, options?: { betweenKeysMs?: number }): Promise<void>
  /** starts a node that was killed again, on its port and with its folder (it rejoins as a replica) */
  restart(port: number): Promise<void>
  /** the masters' ports */
  masters(): Promise<number[]>
  stop(): Promise<void>
}

interface Line {
  id: string
  port: number
  flags: string[]
  master: string
  ranges: Array<[number, number]>
}

function linesOf(text: string): Line[] {
  return text
    .trim()
    .split('\n')
    .map((line) => line.split(' '))
    .filter((fields) => fields.length >= 8)
    .map((fields) => ({
      id: fields[0]!,
      port: Number(fields[1]!.split('@')[0]!.split(':').at(-1)),
      flags: fields[2]!.split(','),
      master: fields[3]!,
      ranges: fields
        .slice(8)
        .filter((s) => !s.startsWith('['))
        .map((s) => {
          const [a, b] = s.split('-').map(Number)
          return [a!, b ?? a!] as [number, number]
        }),
    }))
}

/** Whether this machine can cut a node off the cluster's bus (`partitionOwner`): iptables, as root. */
export function partitionable(): boolean {
  try {
    execFileSync('iptables', ['-L', 'INPUT', '-n'], { stdio: 'ignore' })
    return process.getuid?.() === 0
  } catch {
    return false
  }
}

export async function startRedisCluster(): Promise<ClusterSet> {
  const dir = mkdtempSync(join(tmpdir(), 'chat-auth-cluster-'))
  const ports: number[] = []
  const busPorts = new Map<number, number>()
  for (let i = 0; i < 6; i++) {
    const port = await freePort()
    ports.push(port)
    // A bus port of its own (not port + 10000, which may be taken or past 65535).
    busPorts.set(port, await freePort())
  }
  // Each node on a loopback address of its own, its outgoing links from it too
  // (bind-source-addr), so that a firewall rule can cut one node off the cluster's bus.
  const hosts = new Map(ports.map((port, i) => [port, `127.0.0.${11 + i}`]))
  const partitions = new Set<() => void>()
  const servers = new Map<number, ChildHandle>()
  const clients = new Map<number, Redis>()
  const dead = new Set<number>()

  const client = async (port: number) => {
    let c = clients.get(port)
    if (!c) {
      c = new Redis({ port, host: hosts.get(port)!, maxRetriesPerRequest: 1, retryStrategy: () => 50, lazyConnect: true })
      c.on('error', () => {})
      clients.set(port, c)
    }
    return c
  }
  const launch = async (port: number) => {
    const folder = join(dir, String(port))
    mkdirSync(folder, { recursive: true })
    const args = [
      '--port', String(port), '--bind', hosts.get(port)!, '--bind-source-addr', hosts.get(port)!, '--save', '', '--appendonly', 'no', '--loglevel', 'warning', '--dir', folder,
      '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '1000', '--cluster-port', String(busPorts.get(port)!),
      '--cluster-replica-validity-factor', '0', '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0',
    ]
    const started = spawnProcess('redis-server', args, { name: `redis-cluster-${port}` })
    servers.set(port, started)
    await waitFor(`redis-server ${port} to answer`, async () => {
      if (!started.running()) throw new Error(`redis-server ${port} exited: ${started.output()}`)
      return (await client(port)).ping()
    }, { until: (reply) => reply === 'PONG' })
  }
  await Promise.all(ports.map(launch))
  execFileSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `${hosts.get(p)}:${p}`), '--cluster-replicas', '1', '--cluster-yes'], { stdio: 'pipe', timeout: 60_000 })

  const live = () => ports.filter((port) => !dead.has(port))
  const view = async (port: number) => linesOf(String(await (await client(port)).call('CLUSTER', 'NODES')))
  const ownerIn = (lines: Line[], slot: number) => lines.find((l) => l.flags.includes('master') && !l.flags.includes('fail') && l.ranges.some(([a, b]) => slot >= a && slot <= b))?.port
  const agreedOwner = async (slot: number) => {
    const owners = await Promise.all(live().map(async (port) => ownerIn(await view(port).catch(() => []), slot)))
    return owners.every((o) => o !== undefined && o === owners[0]) ? owners[0] : undefined
  }
  const set: ClusterSet = {
    ports,
    hosts,
    nodesEnv: ports.map((port) => `${hosts.get(port)}:${port}`).join(','),
    addressOf: (port) => `${hosts.get(port)}:${port}`,
    client,
    async slotOf(key) {
      return Number(await (await client(ports[0]!)).call('CLUSTER', 'KEYSLOT', key))
    },
    ownerOf: (slot, timeoutMs = 30_000) =>
      waitFor(`every node to agree on the master of slot ${slot}`, () => agreedOwner(slot), { until: (owner) => owner !== undefined, timeoutMs, everyMs: 100 }).then((owner) => owner!),
    async replicaOf(port) {
      const lines = await view(port)
      const me = lines.find((l) => l.port === port)!
      const replica = lines.find((l) => l.master === me.id && !l.flags.includes('fail') && !dead.has(l.port))
      if (replica === undefined) throw new Error(`no live replica of ${port}`)
      return replica.port
    },
    async failover(slot, timeoutMs = 30_000) {
      const before = await set.ownerOf(slot)
      const replica = await set.replicaOf(before)
      await (await client(replica)).call('CLUSTER', 'FAILOVER')
      await waitFor(`${replica} to take slot ${slot}`, () => agreedOwner(slot), { until: (owner) => owner === replica, timeoutMs, everyMs: 100 })
      return replica
    },
    async killOwner(slot, timeoutMs = 30_000) {
      const before = await set.ownerOf(slot)
      const replica = await set.replicaOf(before)
      dead.add(before)
      await servers.get(before)?.kill9()
      clients.get(before)?.disconnect()
      clients.delete(before)
      await waitFor(`${replica} to take slot ${slot} after ${before} was killed`, () => agreedOwner(slot), { until: (owner) => owner === replica, timeoutMs, everyMs: 100 })
      return { killed: before, owner: replica }
    },
    async cutOffOwner(slot, options = {}) {
      const former = await set.ownerOf(slot)
      const replica = await set.replicaOf(former)
      servers.get(former)!.pause()
      dead.add(former)
      try {
        await (await client(replica)).call('CLUSTER', 'FAILOVER', 'TAKEOVER')
        await waitFor(`${replica} to take slot ${slot} from the stopped ${former}`, () => agreedOwner(slot), { until: (owner) => owner === replica, timeoutMs: options.timeoutMs ?? 30_000, everyMs: 100 })
        await sleep(options.stoppedMs ?? 0)
      } finally {
        servers.get(former)!.resume()
        dead.delete(former)
      }
      const demoted = async () => (await view(former).catch(() => [])).find((l) => l.port === former)?.flags.includes('slave') === true
      await waitFor(`${former} to learn it was replaced`, demoted, { until: (yes) => yes, timeoutMs: options.timeoutMs ?? 30_000, everyMs: 50 })
      return { former, owner: replica }
    },
    async partitionOwner(slot, timeoutMs = 30_000) {
      const former = await set.ownerOf(slot)
      const replica = await set.replicaOf(former)
      // Its bus port refused to everyone, and whatever it sends from its address to a bus port dropped.
      const rules = [
        ['INPUT', '-p', 'tcp', '--dport', String(busPorts.get(former)!), '-j', 'DROP'],
        ...[...busPorts.values()].map((bus) => ['INPUT', '-s', hosts.get(former)!, '-p', 'tcp', '--dport', String(bus), '-j', 'DROP']),
      ]
      for (const rule of rules) execFileSync('iptables', ['-I', ...rule])
      let healed = false
      const heal = async () => {
        if (healed) return
        healed = true
        partitions.delete(heal)
        for (const rule of rules) execFileSync('iptables', ['-D', ...rule], { stdio: 'ignore' })
        dead.delete(former)
      }
      partitions.add(heal)
      dead.add(former)
      try {
        await waitFor(`${replica} to take slot ${slot} from the cut-off ${former}`, () => agreedOwner(slot), { until: (owner) => owner === replica, timeoutMs, everyMs: 100 })
      } catch (error) {
        await heal()
        throw error
      }
      return { former, owner: replica, heal }
    },
    async migrateSlot(slot, toPort, options = {}) {
      const fromPort = await set.ownerOf(slot)
      if (fromPort === toPort) return
      const ids = new Map((await view(fromPort)).map((l) => [l.port, l.id]))
      const [from, to] = [await client(fromPort), await client(toPort)]
      await to.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', ids.get(fromPort)!)
      await from.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', ids.get(toPort)!)
      for (;;) {
        const keys = (await from.call('CLUSTER', 'GETKEYSINSLOT', slot, 10)) as string[]
        if (keys.length === 0) break
        await from.call('MIGRATE', hosts.get(toPort)!, toPort, '', 0, 5000, 'KEYS', ...keys)
        await sleep(options.betweenKeysMs ?? 0)
      }
      // The new owner first, then the old one, then the rest: the order redis-cli uses.
      const toId = ids.get(toPort)!
      await to.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId)
      await from.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId)
      for (const port of live()) if (port !== fromPort && port !== toPort) await (await client(port)).call('CLUSTER', 'SETSLOT', slot, 'NODE', toId).catch(() => {})
      await waitFor(`${toPort} to serve slot ${slot}`, () => agreedOwner(slot), { until: (owner) => owner === toPort, timeoutMs: 30_000, everyMs: 50 })
    },
    async restart(port) {
      dead.delete(port)
      await launch(port)
    },
    async masters() {
      return (await view(live()[0]!)).filter((l) => l.flags.includes('master') && !l.flags.includes('fail') && l.ranges.length > 0).map((l) => l.port)
    },
    async stop() {
      for (const heal of [...partitions]) await heal()
      for (const c of clients.values()) c.disconnect()
      await Promise.allSettled([...servers.values()].map((s) => s.stop(3000)))
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await waitFor('the cluster to be ok', async () => String(await (await client(ports[0]!)).call('CLUSTER', 'INFO')), { until: (info) => info.includes('cluster_state:ok'), timeoutMs: 30_000, everyMs: 100 })
  return set
}
