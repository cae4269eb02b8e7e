/**
 * The load generator of bench/scenarios/generator-instructions.ts, in a process of its own
 * under callgrind: it warms up, says so, waits for the count to be switched on, sends the
 * counted requests and reports their statuses, all over its IPC channel.
 */
import { VERIFY_PATH } from '../../src/routes/verify/path.js'
import { runLoad } from './load.js'

/** What the parent tells a generator: where to send which requests. */
export interface GeneratorJob {
  url: string
  authorizations: string[]
  warmUp: number
  requests: number
  connections: number
}

const job = await new Promise<GeneratorJob>((resolve) => process.once('message', (message) => resolve(message as GeneratorJob)))
let n = 0
const workload = () => ({ next: () => ({ method: 'GET' as const, path: VERIFY_PATH, headers: { authorization: job.authorizations[n++ % job.authorizations.length]! } }) })
const load = (amount: number) => runLoad(workload(), { label: 'generator', urls: [job.url], connections: job.connections, durationS: 3600, amount, progress: null })
await load(job.warmUp)
process.send!({ warm: true })
await new Promise((resolve) => process.once('message', resolve))
const result = await load(job.requests)
process.send!({ responses: result.responses, statuses: result.statuses })
process.disconnect()
