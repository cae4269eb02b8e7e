/**
 * generator-instructions: the load generator's CPU instructions per response, counted by valgrind's callgrind: what
 * the kit's own generator (bench/lib/load.ts, autocannon inside: a JavaScript HTTP parser
 * that reads every header and collects every body) spends on each answer it receives, for
 * bare Fastify's `{"ok":true}`, for the same route sending verify-hot's answer (the
 * `answer` baseline, bench/baselines/server.ts), and for a node. On a machine of two cores
 * the generator shares the cores with the server, so a dearer answer lowers the req/s of any
 * server that sends it; this count does not move with the machine's load.
 *
 * The servers run uninstrumented; each generator runs in a process of its own under
 * callgrind (bench/lib/generator-child.ts), switched on for the counted requests only. Needs valgrind and PostgreSQL at --pg-url.
 */
import { execFileSync, fork } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { common, number } from '../lib/args.js'
import { latestDump } from '../lib/callgrind-dumps.js'
import { stableStart } from '../lib/data.js'
import type { GeneratorJob } from '../lib/generator-child.js'
import { DIST, freePort, startProcess } from '../lib/procs.js'
import { defineScenario } from '../lib/scenario.js'
import { scratchDataset } from '../lib/scratch.js'
import { verifyAnswer } from '../lib/workloads.js'

export default defineScenario({
  name: 'generator-instructions',
  description: "the load generator's own instructions per response under callgrind: bare Fastify's answer, verify-hot's on bare Fastify, a node's (~4 min); needs valgrind",
  options: {
    requests: number('responses counted per server', { default: 10_000 }),
    warmUpRequests: number('requests sent before counting', { default: 20_000 }),
    connections: { ...common.connections(4), smoke: undefined },
    hot: common.hot(1000),
    pgUrl: common.pgUrl(),
  },
  smoke: 'needs valgrind: each generator runs under callgrind (~4 min), no cheap smoke',
  async run(ctx) {
    const dumps = mkdtempSync(join(tmpdir(), 'bench-generator-'))
    ctx.defer(() => rmSync(dumps, { recursive: true, force: true }))
    const { ds, nodeEnv, drop } = await scratchDataset(ctx.opts.pgUrl, ctx.opts.hot)
    ctx.defer(drop)
    const start = async (name: string, script: string, scriptArgs: string[], env: Record<string, string>, readyPath?: string) => {
      const proc = await startProcess({ name, script, args: scriptArgs, env, port: await freePort(), readyPath })
      ctx.watch(proc)
      ctx.defer(() => proc.stop())
      return proc
    }
    const node = await start('node', DIST + 'bench/node-host.js', [], nodeEnv, '/readyz')
    const bare = await start('bare', DIST + 'bench/baselines/server.js', ['bare'], {})
    const answer = await start('answer', DIST + 'bench/baselines/server.js', ['answer'], { VERIFY_ANSWER: await verifyAnswer(node.url, ds) })
    const authorizations = Array.from({ length: ds.layout.hot }, (_, i) => `Bearer ${ds.token(stableStart(ds.layout) + i)}`)
    const counted: Array<[string, number]> = []
    for (const [name, proc] of [['bare', bare], ['answer', answer], ['node', node]] as const) {
      const job = { url: proc.url, authorizations, warmUp: ctx.opts.warmUpRequests, requests: ctx.opts.requests, connections: ctx.opts.connections }
      counted.push([name, await countGenerator(name, job, dumps)])
    }
    const bareCount = counted[0]![1]
    return {
      scenario: 'generator-instructions',
      title: 'generator-instructions: the load generator (bench/lib/load.ts) instructions per response',
      tables: [{ headers: ['server', 'instructions per response', "× bare's"], rows: counted.map(([name, perResponse]) => [name, Math.round(perResponse).toLocaleString('en-US'), (perResponse / bareCount).toFixed(3) + '×']) }],
      data: Object.fromEntries(counted),
    }
  },
})

async function countGenerator(name: string, job: GeneratorJob, dumps: string): Promise<number> {
  const out = join(dumps, `${name}.%p`)
  // the same V8 settings as instructions.ts: single-threaded, a fixed young generation, no memory reducer
  const child = fork(fileURLToPath(new URL('../lib/generator-child.js', import.meta.url)), [], {
    execPath: 'valgrind',
    execArgv: ['-q', '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}`, process.execPath, '--single-threaded', '--min-semi-space-size=16', '--max-semi-space-size=16', '--no-memory-reducer'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  const next = () => new Promise<Record<string, unknown>>((resolve, reject) => {
    child.once('message', (message) => resolve(message as Record<string, unknown>))
    child.once('exit', (code) => reject(new Error(`${name}: the generator exited (${code})`)))
  })
  const control = (...flags: string[]) => execFileSync('callgrind_control', [...flags, String(child.pid)], { stdio: 'ignore' })
  try {
    child.send(job)
    await next()
    control('-i', 'on')
    control('-z')
    child.send({ go: true })
    const done = await next()
    control('-d')
    if ((done.statuses as Record<string, number>)['200'] !== job.requests) throw new Error(`${name}: not every answer was 200: ${JSON.stringify(done.statuses)}`)
    await new Promise((resolve) => child.once('exit', resolve))
    const dumped = latestDump(dumps, name)
    if (dumped === undefined) throw new Error(`${name}: no callgrind dump in ${dumps}`)
    return dumped.instructions / job.requests
  } finally {
    child.kill()
  }
}
