/**
 * Young-generation collections per request, bare Fastify vs a node, under the same
 * verify-hot requests (`--trace-gc`): a count that does not move with the machine's load.
 * Each scavenge is a pause every request in flight waits for, so it bears on the p99.
 *
 *   node dist/bench/gc-count.js [--requests 100000] [--hot 1000] [--node-flags "--max-semi-space-size=32"]
 */
import { parseArgs } from 'node:util'
import { scratchDataset } from './lib/scratch.js'
import { runLoad, type Workload } from './lib/load.js'
import { DIST, freePort } from './lib/procs.js'
import * as S from './lib/scenarios.js'
import { spawnNode, waitUntilServing } from '../test/support/processes.js'

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '100000' },
    hot: { type: 'string', default: '1000' },
    'node-flags': { type: 'string', default: '' },
    'pg-url': { type: 'string', default: 'postgres://root@127.0.0.1:5432/postgres' },
  },
})
const requests = Number(args.requests)
const hot = Number(args.hot)
const flags = args['node-flags']!.split(/\s+/).filter(Boolean)

async function count(target: string, script: string, scriptArgs: string[], env: Record<string, string>, readyPath: string, workload: () => Workload) {
  const port = await freePort()
  const proc = spawnNode(script, { name: target, args: scriptArgs, nodeFlags: ['--trace-gc', ...flags], inheritEnv: true, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, ipc: true, keepBytes: 64 * 2 ** 20 })
  const url = `http://127.0.0.1:${port}`
  try {
    await waitUntilServing(proc, url + readyPath, 120_000)
    await runLoad(workload(), { label: target, urls: [url], connections: 50, durationS: 3600, amount: Math.max(hot * 10, 20_000), progress: null })
    const before = (proc.output().match(/Scavenge/g) ?? []).length
    const beforeMark = (proc.output().match(/Mark-Compact|Mark-sweep/g) ?? []).length
    await runLoad(workload(), { label: target, urls: [url], connections: 50, durationS: 3600, amount: requests, progress: null })
    await new Promise((resolve) => setTimeout(resolve, 200))
    const scavenges = (proc.output().match(/Scavenge/g) ?? []).length - before
    const marks = (proc.output().match(/Mark-Compact|Mark-sweep/g) ?? []).length - beforeMark
    process.stdout.write(`${target.padEnd(5)} ${scavenges} scavenges, ${marks} mark-compacts per ${requests.toLocaleString('en-US')} requests (${((requests / Math.max(1, scavenges))).toFixed(0)} requests per scavenge)\n`)
  } finally {
    await proc.stop(10_000)
  }
}

const { ds, nodeEnv, drop } = await scratchDataset(args['pg-url']!, hot)
try {
  await count('bare', DIST + 'bench/baselines/server.js', ['bare'], {}, '/healthz', () => S.verifyHot(ds))
  await count('node', DIST + 'bench/node-host.js', [], nodeEnv, '/readyz', () => S.verifyHot(ds))
} finally {
  await drop()
}
