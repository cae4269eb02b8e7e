/**
 * gc-count: young-generation collections per request, bare Fastify vs a node, under the same
 * verify-hot requests (`--trace-gc`): a count that does not move with the machine's load.
 * Each scavenge is a pause every request in flight waits for, so it bears on the p99.
 */
import { spawnNode, waitUntilServing } from '../../test/support/processes.js'
import { common, number, string } from '../lib/args.js'
import { runLoad, type Workload } from '../lib/load.js'
import { DIST, freePort } from '../lib/procs.js'
import { defineScenario, type Context } from '../lib/scenario.js'
import { scratchDataset } from '../lib/scratch.js'
import { verifyHot } from '../lib/workloads.js'

interface Counted {
  target: string
  scavenges: number
  marks: number
}

type Opts = { requests: number; hot: number; warmUpRequests: number | undefined; nodeOptions: string | undefined }

async function count(ctx: Context<Opts>, target: string, script: string, scriptArgs: string[], env: Record<string, string>, readyPath: string, workload: () => Workload): Promise<Counted> {
  const { requests, hot } = ctx.opts
  const flags = ctx.opts.nodeOptions?.split(/\s+/).filter(Boolean) ?? []
  const port = await freePort()
  const proc = spawnNode(script, { name: target, args: scriptArgs, nodeFlags: ['--trace-gc', ...flags], inheritEnv: true, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, ipc: true, keepBytes: 64 * 2 ** 20 })
  ctx.watch(proc)
  const url = `http://127.0.0.1:${port}`
  try {
    await waitUntilServing(proc, url + readyPath, 120_000)
    await runLoad(workload(), { label: target, urls: [url], connections: 50, durationS: 3600, amount: ctx.opts.warmUpRequests ?? Math.max(hot * 10, 20_000), progress: null })
    const before = (proc.output().match(/Scavenge/g) ?? []).length
    const beforeMark = (proc.output().match(/Mark-Compact|Mark-sweep/g) ?? []).length
    await runLoad(workload(), { label: target, urls: [url], connections: 50, durationS: 3600, amount: requests, progress: null })
    await new Promise((resolve) => setTimeout(resolve, 200))
    const scavenges = (proc.output().match(/Scavenge/g) ?? []).length - before
    const marks = (proc.output().match(/Mark-Compact|Mark-sweep/g) ?? []).length - beforeMark
    return { target, scavenges, marks }
  } finally {
    await proc.stop(10_000)
  }
}

export default defineScenario({
  name: 'gc-count',
  description: 'scavenges and mark-compacts per request, bare Fastify vs a node, under verify-hot (--trace-gc)',
  options: {
    requests: number('requests counted per target', { default: 100_000, smoke: 2000 }),
    hot: common.hot(1000, 100),
    warmUpRequests: number('requests sent before counting (default: 10 × --hot, at least 20,000)', { smoke: 500 }),
    nodeOptions: string('extra node flags of both targets, e.g. "--max-semi-space-size=32"'),
    pgUrl: common.pgUrl(),
  },
  smoke: true,
  async run(ctx) {
    const { ds, nodeEnv, drop } = await scratchDataset(ctx.opts.pgUrl, ctx.opts.hot)
    ctx.defer(drop)
    const counted = [
      await count(ctx, 'bare', DIST + 'bench/baselines/server.js', ['bare'], {}, '/healthz', () => verifyHot(ds)),
      await count(ctx, 'node', DIST + 'bench/node-host.js', [], nodeEnv, '/readyz', () => verifyHot(ds)),
    ]
    const { requests } = ctx.opts
    return {
      scenario: 'gc-count',
      title: `gc-count: collections per ${requests.toLocaleString('en-US')} verify-hot requests`,
      tables: [{ headers: ['target', 'scavenges', 'mark-compacts', 'requests per scavenge'], rows: counted.map((c) => [c.target, String(c.scavenges), String(c.marks), (requests / Math.max(1, c.scavenges)).toFixed(0)]) }],
      data: counted,
    }
  },
})
