import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { runLoad, type LoadResult } from '../bench/lib/load.js'
import { errorKindsText, summarizeRuns } from '../bench/lib/report.js'

/**
 * The kit's load runs say what their errors were: a target that fails for "1 error" must be
 * able to say which (a reset connection, a timeout), and an error is counted once.
 */
t.test('a load run counts its errors by kind', async (t) => {
  let requests = 0
  const server: Server = createServer((request, response) => {
    // every fifth request: its connection reset under it, as a crashed peer's would be
    if (++requests % 5 === 0) return void request.socket.resetAndDestroy()
    response.end('ok')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo

  const result = await runLoad({ next: () => ({ method: 'GET', path: '/' }) }, { label: 'resets', urls: [`http://127.0.0.1:${port}`], connections: 2, durationS: 1, progress: null })

  t.ok(result.responses > 0, 'the other requests were answered')
  t.ok(result.errors > 0, 'the resets were counted')
  t.same(Object.keys(result.errorKinds), ['ECONNRESET'], 'as what they were')
  t.equal(result.errorKinds.ECONNRESET, result.errors, 'each of them')
  t.equal(errorKindsText(result.errorKinds), ` (ECONNRESET ${result.errors.toLocaleString('en-US')})`, 'and the report names them')
})

t.test("a timeout is one error, as autocannon counts it: not two", async (t) => {
  const run = (errors: number, timeouts: number, errorKinds: Record<string, number>): LoadResult => ({
    label: 'r',
    elapsedS: 1,
    responses: 100,
    rps: 100,
    latency: { count: 100, p50: 1, p99: 2, p999: 3, mean: 1, max: 3 },
    statuses: { '200': 100 },
    errors,
    timeouts,
    errorKinds,
    wrong: 0,
    byKind: {},
  })
  const summary = summarizeRuns([run(1, 1, { timeout: 1 }), run(2, 0, { ECONNRESET: 2 })])!
  t.equal(summary.errors, 3)
  t.same(summary.errorKinds, { timeout: 1, ECONNRESET: 2 })
  t.equal(errorKindsText(summary.errorKinds), ' (timeout 1, ECONNRESET 2)')
  t.equal(errorKindsText({}), '', 'no errors: nothing added')
})
