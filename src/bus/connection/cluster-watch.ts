import { Redis } from 'ioredis'
import type { RedisClusterConnection } from '../../config.js'
import { createPrimaryWatch, type Named, type PrimaryWatch, type Voter } from './primary-watch.js'
import { serverAddress } from './redis-connection.js'

/**
 * Redis Cluster (SPEC §11): the master of the bus's hash slot that a majority of the
 * cluster's nodes names, by primary-watch.ts's rules. Each node is asked `CLUSTER NODES` and
 * names the master whose slots hold ours, at its config epoch; a master it marks failing (or
 * suspects) is not named, so a node whose view is in doubt votes for nobody. A master cut off
 * from the others still names itself, at its old epoch, until it notices: the others outvote
 * it. The cluster's nodes are read once, from the first seed that answers, when the node
 * starts (a node restarted after the cluster gained or lost nodes counts them again).
 */
export interface ClusterWatchOptions {
  connection: RedisClusterConnection
  /** the key whose slot the bus lives in (`{REDIS_PREFIX}`) */
  slotKey: string
  leaseMs: number
  queryTimeoutMs: number
  now: () => number
  onPrimaryChanged(address: string | undefined): void
  onError(error: Error): void
}

export interface ClusterWatch extends PrimaryWatch {
  /** the bus's hash slot, once the cluster answered */
  slot(): number | undefined
}

export function createClusterWatch(options: ClusterWatchOptions): ClusterWatch {
  let inner: PrimaryWatch | undefined
  let slot: number | undefined
  let discovering: Promise<void> | undefined
  let closed = false

  const clientOf = (host: string, port: number, lazyConnect = false) => {
    const client = new Redis({
      host,
      port,
      username: options.connection.username,
      password: options.connection.password,
      ...(options.connection.tls ? { tls: {} } : {}),
      lazyConnect,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      enableReadyCheck: false,
      connectTimeout: Math.max(1000, options.queryTimeoutMs),
      retryStrategy: (attempt) => Math.min(500, 25 * 2 ** Math.min(attempt, 5)),
    })
    client.on('error', (error: Error) => options.onError(error))
    return client
  }

  /** The cluster's nodes and the bus's slot, from the first seed that answers. */
  async function discover(): Promise<void> {
    for (const seed of options.connection.nodes) {
      const client = clientOf(seed.host, seed.port, true)
      try {
        await client.connect()
        const [found, nodesText] = await Promise.all([client.call('CLUSTER', 'KEYSLOT', options.slotKey), client.call('CLUSTER', 'NODES')])
        const nodes = parseNodes(String(nodesText)).filter((node) => !node.flags.includes('handshake') && !node.flags.includes('noaddr'))
        if (closed || nodes.length === 0) return
        slot = Number(found)
        const voters = nodes.map(({ address }) => voterAt(address, slot!))
        inner = createPrimaryWatch({ voters, leaseMs: options.leaseMs, queryTimeoutMs: options.queryTimeoutMs, now: options.now, onPrimaryChanged: options.onPrimaryChanged })
        inner.poll()
        return
      } catch (error) {
        options.onError(error as Error)
      } finally {
        client.disconnect()
      }
    }
  }

  function voterAt(address: string, slotOfBus: number): Voter {
    const at = address.lastIndexOf(':')
    const client = clientOf(address.slice(0, at), Number(address.slice(at + 1)))
    return {
      ask: async () => ownerOf(parseNodes(String(await client.call('CLUSTER', 'NODES'))), slotOfBus),
      close: () => client.disconnect(),
    }
  }

  return {
    poll() {
      if (closed) return
      if (inner !== undefined) return inner.poll()
      discovering ??= discover().finally(() => (discovering = undefined))
    },
    primaryAddress: () => inner?.primaryAddress(),
    vouchedUntil: () => inner?.vouchedUntil() ?? 0,
    confirm: (address, after, timeoutMs) => inner?.confirm(address, after, timeoutMs) ?? Promise.resolve(undefined),
    slot: () => slot,
    close() {
      closed = true
      inner?.close()
    },
  }
}

interface ClusterNode {
  address: string
  flags: string[]
  configEpoch: string
  /** slot ranges it serves, [first, last] */
  ranges: Array<[number, number]>
}

/** `CLUSTER NODES`: one line per node — id, ip:port@cport, flags, master, ping, pong, config-epoch, link, slots… */
export function parseNodes(text: string): ClusterNode[] {
  const nodes: ClusterNode[] = []
  for (const line of text.split('\n')) {
    const fields = line.trim().split(' ')
    if (fields.length < 8) continue
    const hostPort = fields[1]!.split('@')[0]!.split(',')[0]!
    const at = hostPort.lastIndexOf(':')
    if (at <= 0) continue
    const ranges: Array<[number, number]> = []
    // Migrating and importing markers ("[slot->-id]", "[slot-<-id]") name no slot the node serves.
    for (const slots of fields.slice(8).filter((s) => !s.startsWith('['))) {
      const [first, last] = slots.split('-').map(Number)
      if (first !== undefined && Number.isInteger(first)) ranges.push([first, last ?? first])
    }
    nodes.push({ address: serverAddress(hostPort.slice(0, at), hostPort.slice(at + 1)), flags: fields[2]!.split(','), configEpoch: fields[6]!, ranges })
  }
  return nodes
}

/** The master serving `slot` in one node's view, unless that view holds it failing. */
export function ownerOf(nodes: ClusterNode[], slot: number): Named | undefined {
  const owner = nodes.find((node) => node.flags.includes('master') && node.ranges.some(([first, last]) => slot >= first && slot <= last))
  if (owner === undefined || owner.flags.includes('fail') || owner.flags.includes('fail?')) return undefined
  return { primary: `${owner.address}@${owner.configEpoch}`, address: owner.address }
}
