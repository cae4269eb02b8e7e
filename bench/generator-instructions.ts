/**
 * The load generator's CPU instructions per response, counted by valgrind's callgrind: what
 * the kit's own generator (bench/lib/load.ts, autocannon inside: a JavaScript HTTP parser
 * that reads every header and collects every body) spends on each answer it receives, for
 * bare Fastify's `{"ok":true}`, for the same route sending verify-hot's answer (the
 * `answer` baseline, bench/baselines/server.ts), and for a node. On a machine of two cores
 * the generator shares the cores with the server, so a dearer answer lowers the req/s of any
 * server that sends it; this count does not move with the machine's load.
 *
 *   node dist/bench/generator-instructions.js [--requests 10000] [--warm-up 20000] [--connections 4] [--hot 1000]
 *
 * The servers run uninstrumented; each generator runs in a process of its own under
 * callgrind, switched on for the counted requests only. Needs valgrind and PostgreSQL at --pg-url.
 */
import { execFileSync, fork } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { latestDump } from './lib/callgrind-dumps.js'
import { runLoad } from './lib/load.js'
import { DIST, freePort, startProcess, type Proc } from './lib/procs.js'
import { stableStart } from './lib/data.js'
import * as S from './lib/scenarios.js'
import { scratchDataset } from './lib/scratch.js'
import { VERIFY_PATH } from '../src/routes/verify/path.js'

const { values: args } = parseArgs({
  options: {
    child: { type: 'boolean', default: false },
    requests: { type: 'string', default: '10000' },
    'warm-up': { type: 'string', default: '20000' },
    connections: { type: 'string', default: '4' },
    hot: { type: 'string', default: '1000' },
    'pg-url': { type: 'string', default: 'postgres://root@127.0.0.1:5432/postgres' },
  },
})

/** What the parent tells a generator: where to send which requests. */
interface Job {
  url: string
  authorizations: string[]
  warmUp: number
  requests: number
  connections: number
}

if (args.child) await generate()
else await count()

/** The child: warms up, says so, waits for the count to be switched on, sends the counted requests. */
async function generate(): Promise<void> {
  const job = await new Promise<Job>((resolve) => process.once('message', (message) => resolve(message as Job)))
  let n = 0
  const workload = () => ({ next: () => ({ method: 'GET' as const, path: VERIFY_PATH, headers: { authorization: job.authorizations[n++ % job.authorizations.length]! } }) })
  const load = (amount: number) => runLoad(workload(), { label: 'generator', urls: [job.url], connections: job.connections, durationS: 3600, amount, progress: null })
  await load(job.warmUp)
  process.send!({ warm: true })
  await new Promise((resolve) => process.once('message', resolve))
  const result = await load(job.requests)
  process.send!({ responses: result.responses, statuses: result.statuses })
  process.disconnect()
}

async function count(): Promise<void> {
  const dumps = mkdtempSync(join(tmpdir(), 'bench-generator-'))
  const { ds, nodeEnv, drop } = await scratchDataset(args['pg-url']!, Number(args.hot))
  const procs: Proc[] = []
  try {
    const start = async (name: string, script: string, scriptArgs: string[], env: Record<string, string>, readyPath?: string) => {
      const proc = await startProcess({ name, script, args: scriptArgs, env, port: await freePort(), readyPath })
      procs.push(proc)
      return proc
    }
    const node = await start('node', DIST + 'bench/node-host.js', [], nodeEnv, '/readyz')
    const bare = await start('bare', DIST + 'bench/baselines/server.js', ['bare'], {})
    const answer = await start('answer', DIST + 'bench/baselines/server.js', ['answer'], { VERIFY_ANSWER: await S.verifyAnswer(node.url, ds) })
    const authorizations = Array.from({ length: ds.layout.hot }, (_, i) => `Bearer ${ds.token(stableStart(ds.layout) + i)}`)
    const counted: Array<[string, number]> = []
    for (const [name, proc] of [['bare', bare], ['answer', answer], ['node', node]] as const) {
      counted.push([name, await countGenerator(name, { url: proc.url, authorizations, warmUp: Number(args['warm-up']), requests: Number(args.requests), connections: Number(args.connections) }, dumps)])
    }
    const bareCount = counted[0]![1]
    process.stdout.write('load generator (bench/lib/load.ts) instructions per response\n')
    for (const [name, perResponse] of counted) process.stdout.write(`${name.padEnd(7)} ${Math.round(perResponse).toLocaleString('en-US').padStart(9)}  ${(perResponse / bareCount).toFixed(3)}× bare's\n`)
  } finally {
    for (const proc of procs) await proc.stop()
    await drop()
    rmSync(dumps, { recursive: true, force: true })
  }
}

async function countGenerator(name: string, job: Job, dumps: string): Promise<number> {
  const out = join(dumps, `${name}.%p`)
  // the same V8 settings as instructions.ts: single-threaded, a fixed young generation, no memory reducer
  const child = fork(new URL(import.meta.url).pathname, ['--child'], {
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
