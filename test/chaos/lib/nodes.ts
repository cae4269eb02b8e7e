import { ADMIN_TOKEN, JWT_SECRET, TEST_CACHE_SIZE } from '../../support/constants.js'
import { call } from '../../support/http-client.js'
import { freePort } from '../../support/ports.js'
import { spawnNode, waitUntilServing, type GatewayProcess as NodeProcess } from '../../support/processes.js'
import { fileURLToPath } from 'node:url'

/** Every run's nodes: `chat-auth serve`'s, with test-only session routes, and in a mutant run less one defence (lib/mutants.mjs). */
export const NODE_HOST = fileURLToPath(new URL('./node-host.mjs', import.meta.url))
export type Mutant =
  | 'no-epoch-flush'
  | 'catch-up-skips-window'
  | 'no-primary-check'
  | 'catch-up-ignores-revoked-tokens'
  | 'subscribed-reads-skip'
  | 'rebuild-misses-arrivals'
  | 'retention-ignores-skew'
  | 'acks-before-sessions'
  | 'cohort-unlink-loses-the-rest'
  | 'acks-before-stream-writes'
  | 'webhook-failures-recorded-delivered'
  | 'acks-wait-for-replays'
  | 'caches-after-acknowledgement'
  | 'receipt-claims-every-node'
  | 'receipt-leaves-out-unacknowledged'
  | 'no-cluster-watch'
  | 'ignores-slot-left'

/** `clockOffset`: the node's wall clock this far off the machine's (and PostgreSQL's), under libfaketime. */
export async function startChaosNode(name: string, env: Record<string, string>, options: { mutant: Mutant | undefined; clockOffset?: string | undefined }): Promise<NodeProcess> {
  const clock = options.clockOffset !== undefined ? { clockOffset: options.clockOffset } : {}
  const port = await freePort()
  // The safe runs' nodes get the environment startGatewayProcess gives `chat-auth serve`; the mutant runs' theirs as before.
  const served = options.mutant ? {} : { CACHE_SIZE: TEST_CACHE_SIZE, KEEP_ALIVE_TIMEOUT: '3' }
  const base = { HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'warn', SEED_DEMO: 'false', ...served, ADMIN_TOKEN, JWT_SECRET }
  const proc = spawnNode(NODE_HOST, { name, args: options.mutant ? [options.mutant] : [], ...clock, env: { ...base, ...env } })
  const url = `http://127.0.0.1:${port}`
  await waitUntilServing(proc, `${url}/readyz`)
  return { ...proc, port, url }
}

/**
 * How often the mutant acted, over the nodes still running: 0 means it never reached them,
 * and its run proves nothing. A mutant leaves a node's structures broken (the cohort mutant's
 * list throws in every later unlink), and a node may die of that before it is asked: it is
 * said, with the end of its output, rather than failing a run whose checker already spoke.
 */
export async function mutantCalls(nodes: NodeProcess[], comment: (line: string) => void): Promise<number> {
  let calls = 0
  for (const node of nodes) {
    if (!node.running()) {
      comment(`${node.name} exited during the mutant run; the end of its output:\n${node.output().slice(-2000)}`)
      continue
    }
    const body = String((await call(node.url, 'GET', '/metrics')).body)
    calls += Number(/^chat_auth_chaos_mutant_calls_total\{[^}]*\} (\d+)/m.exec(body)?.[1] ?? 0)
  }
  return calls
}
