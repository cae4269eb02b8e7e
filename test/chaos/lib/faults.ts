import { performance } from 'node:perf_hooks'
import { sleep } from '../../support/poll.js'
import type { SentinelSet } from '../../support/services.js'
import { LEASE_MS, type Scenario, type SentinelScenario } from './scenario.js'

/** One fault the driver injects while its load runs; it returns once the fault is over (the nodes may still be recovering). */
export type Fault<S = Scenario> = { name: string; run: (s: S) => Promise<void> }

/** Redis client ids of the nodes' subscriber connections (of node `nodeIndex` only: those its proxy carries). */
export async function subscriberIds(s: Scenario, nodeIndex?: number): Promise<string[]> {
  const client = await s.redis.admin()
  const list = (await client.client('LIST')) as string
  const ids: string[] = []
  for (const line of list.split('\n').filter((l) => / name=[^ ]*:sub:/.test(l))) {
    if (nodeIndex !== undefined && (await s.proxies[nodeIndex]!.count(line.match(/ name=([^ ]+)/)![1]!)) === 0) continue
    ids.push(line.match(/\bid=(\d+)/)![1]!)
  }
  return ids
}

export const FAULTS: Fault[] = [
  {
    name: 'CLIENT KILL TYPE pubsub',
    run: async (s) => {
      await (await s.redis.admin()).client('KILL', 'TYPE', 'pubsub')
    },
  },
  {
    name: 'half-open subscriber (node-1: proxy swallows every byte)',
    run: async (s) => {
      await s.proxies[1]!.blackhole(':sub:')
      await sleep(LEASE_MS * 3) // the node gives up on it by itself
    },
  },
  {
    name: 'reset connections (node-2: RST on all its Redis connections)',
    run: async (s) => {
      await s.proxies[2]!.reset()
    },
  },
  {
    name: 'CLIENT PAUSE 1500 WRITE',
    run: async (s) => {
      await (await s.redis.admin()).client('PAUSE', 1500, 'WRITE')
      await sleep(1500)
    },
  },
  {
    name: 'CLIENT PAUSE 1000 ALL',
    run: async (s) => {
      await (await s.redis.admin()).client('PAUSE', 1000, 'ALL')
      await sleep(1000)
    },
  },
  {
    name: 'Redis restart',
    run: async (s) => {
      await s.redis.restart(300)
    },
  },
  {
    name: 'SIGSTOP node-0 for 1.5 s, then SIGCONT',
    run: async (s) => {
      s.nodes[0]!.pause()
      await sleep(1500)
      s.nodes[0]!.resume()
    },
  },
  {
    name: 'PostgreSQL restart',
    run: async (s) => {
      await s.postgres.restart(500)
    },
  },
  {
    name: 'slow subscriber disconnected by Redis (node-1 stops reading; output buffer limit)',
    run: async (s) => {
      const client = await s.redis.admin()
      const [before] = await subscriberIds(s, 1)
      const previous = ((await client.config('GET', 'client-output-buffer-limit')) as string[])[1]!
      await client.config('SET', 'client-output-buffer-limit', 'pubsub 256kb 128kb 1')
      await s.proxies[1]!.stall(':sub:')
      try {
        const pad = JSON.stringify({ t: 'pad', p: 'x'.repeat(1024 * 1024) })
        const end = performance.now() + 5000
        while (performance.now() < end && before !== undefined && (await subscriberIds(s)).includes(before)) {
          for (let i = 0; i < 8; i++) await client.publish(`chat-auth:changes`, pad)
          await sleep(20)
        }
      } finally {
        await client.config('SET', 'client-output-buffer-limit', previous)
        await s.proxies[1]!.resume()
      }
    },
  },
]

/** `CHAOS_FAULTS=0,3,5` runs only those faults (for investigating one); `CHAOS_SENTINEL_FAULTS` likewise. */
export const selected = <S>(faults: Array<Fault<S>>, variable = 'CHAOS_FAULTS'): Array<Fault<S>> => {
  const only = process.env[variable]
  return only ? only.split(',').map((i) => faults[Number(i)]!) : faults
}

/** Closes every connection of one node (the first subscriber listed) on the server at `port`; that node's bus id. */
export async function killOneNodesConnections(set: SentinelSet, port: number): Promise<string | undefined> {
  const client = await set.client(port)
  const list = ((await client.client('LIST')) as string).split('\n')
  const nodeId = list.map((l) => / name=[^ ]*:sub:([0-9a-f]+)/.exec(l)?.[1]).find((id) => id !== undefined)
  if (nodeId === undefined) return undefined
  for (const line of list.filter((l) => l.includes(`:${nodeId} `))) await client.client('KILL', 'ID', line.match(/\bid=(\d+)/)![1]!).catch(() => {})
  return nodeId
}

/**
 * A split brain on purpose: SENTINEL FAILOVER, then one node's connections to the old
 * primary closed. That node reconnects (asking the sentinels) to the new primary; the old
 * one keeps serving the others until Sentinel demotes it, seconds later. Resolves with the
 * old primary's port and the moved node's bus id.
 */
export async function splitBrain(set: SentinelSet): Promise<{ oldPrimary: number; moved: string | undefined }> {
  const oldPrimary = await set.primaryPort()
  await set.failover(40_000)
  return { oldPrimary, moved: await killOneNodesConnections(set, oldPrimary) }
}

let killedPrimary: number | undefined

export const SENTINEL_FAULTS: Array<Fault<SentinelScenario>> = [
  {
    name: 'SENTINEL FAILOVER while healthy',
    run: async (s) => {
      // As long as the split brain's: a loaded machine has taken over 20 s to see every sentinel name the new primary.
      await s.set.failover(40_000)
    },
  },
  {
    name: "split brain: SENTINEL FAILOVER, then one node's connections to the old primary closed while it still serves",
    run: async (s) => {
      // The fault lasts until the old primary is demoted. Sentinel demotes it only after its
      // INFO (every 10 s) has shown it as a primary for 8 s with no down state; on a loaded
      // machine the 1 s down-after flaps and restarts that wait, and a CI run saw it take
      // over 30 s: this waits for the demotion, it does not time it.
      const { oldPrimary } = await splitBrain(s.set)
      await s.set.waitForRole(oldPrimary, 'slave', 90_000)
    },
  },
  {
    name: 'primary killed (SIGKILL)',
    run: async (s) => {
      killedPrimary = await s.set.killPrimary(60_000)
    },
  },
  {
    name: 'the old primary returns (a primary with empty data until Sentinel makes it a replica)',
    run: async (s) => {
      if (killedPrimary === undefined) return
      await s.set.restart(killedPrimary)
      await s.set.waitForRole(killedPrimary, 'slave', 90_000)
    },
  },
]
