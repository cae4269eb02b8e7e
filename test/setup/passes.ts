import { spawn, spawnSync } from 'node:child_process'
import { relative, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

/**
 * The store matrix: `npm test` runs the suite in two passes side by side, one per store
 * (`TEST_STORE`), and every test file of tap's list (package.json's `tap` section) runs in
 * both, but those named here. This is the one place that says which.
 */
export type Store = 'pglite' | 'postgres'

/**
 * Files whose tests do not use the pass's store (they start their own PostgreSQL database or
 * Redis, or use no store at all): they run once, in the PostgreSQL pass. A single such test
 * in a file that runs twice uses `storeIndependentTest` instead.
 */
const ONCE = [
  'test/bench-smoke.test.ts',
  'test/bus-lease.test.ts',
  'test/catch-up.test.ts',
  'test/chat-example.test.ts',
  'test/client-hostile.test.ts',
  'test/clock-skew.test.ts',
  'test/compose.test.ts',
  'test/console.test.ts',
  'test/config.test.ts',
  'test/database-claim.test.ts',
  'test/docs-page.test.ts',
  'test/jwt.test.ts',
  'test/migrate.test.ts',
  'test/multi-node.test.ts',
  'test/nodes-board.test.ts',
  'test/operators-multi-node.test.ts',
  'test/packaging.test.ts',
  'test/proxies/proxies.test.ts',
  'test/readme-walk-through.test.ts',
  'test/redis-bus-forgery.test.ts',
  'test/redis-bus.test.ts',
  'test/redis-cluster.test.ts',
  'test/redis-sentinel.test.ts',
  'test/revocation-load.test.ts',
  'test/sessions.test.ts',
  'test/setup.test.ts',
  'test/telemetry.test.ts',
  'test/tenant-streams.test.ts',
  'test/unit.test.ts',
  'test/unpublished-changes.test.ts',
  'test/webhooks-fairness.test.ts',
  'test/webhooks-multi-node.test.ts',
]

/** Files about the embedded store's data directory alone: the PGlite pass only. */
const PGLITE_ONLY = ['test/assembly.test.ts', 'test/data-dir-lock.test.ts', 'test/lifecycle.test.ts']

export const PASSES: Record<Store, { leaveOut: readonly string[]; jobs: number }> = {
  pglite: { leaveOut: ONCE, jobs: 2 },
  // Its files wait most (leases, drains, failovers): a third one at a time fills the cores.
  postgres: { leaveOut: PGLITE_ONLY, jobs: 3 },
}

/** Every test file tap would run (its `include` and `exclude`), from the package root. */
export function tapFiles(): string[] {
  const listed = spawnSync('tap', ['list'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })
  if (listed.status !== 0) throw new Error(`tap list failed (${listed.error?.message ?? `exit ${listed.status}`})`)
  return listed.stdout.split('\n').filter(Boolean)
}

/**
 * The files of `store`'s pass; with `only`, those of them that it names (a file tap does
 * not list on its own, such as one of test/api/, runs in both passes).
 */
export function filesOf(store: Store, all: string[] = tapFiles(), only?: string[]): string[] {
  const stale = [...ONCE, ...PGLITE_ONLY].filter((file) => !all.includes(file))
  if (stale.length > 0) throw new Error(`the store matrix (test/setup/passes.ts) names files tap does not list: ${stale.join(', ')}`)
  const candidates = only ?? all
  return candidates.filter((file) => !PASSES[store].leaveOut.includes(file))
}

/**
 * `node --import=tsx test/setup/passes.ts <store> [test files] [tap options]`
 * (`npm run test:pglite`, `npm run test:postgres`): the pass, or the named files among its
 * own, run by tap with `TEST_STORE` set. `--list` prints the files instead.
 */
async function main(args: string[]): Promise<number> {
  const [store, ...rest] = args
  if (store !== 'pglite' && store !== 'postgres') {
    process.stderr.write('usage: passes.ts pglite|postgres [--list] [test files] [tap options]\n')
    return 2
  }
  const named = rest.filter((arg) => arg.endsWith('.test.ts')).map((arg) => relative(process.cwd(), resolve(arg)))
  const options = rest.filter((arg) => !arg.endsWith('.test.ts') && arg !== '--list')
  const files = filesOf(store, tapFiles(), named.length > 0 ? named : undefined)
  if (rest.includes('--list')) {
    process.stdout.write(files.map((file) => file + '\n').join(''))
    return 0
  }
  if (files.length === 0) {
    // tap given no file would run them all
    process.stdout.write(`no file of the ${store} pass among ${named.join(', ')}\n`)
    return 0
  }
  const tap = spawn('tap', [`--jobs=${PASSES[store].jobs}`, ...options, ...files], { stdio: 'inherit', env: { ...process.env, TEST_STORE: store } })
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => tap.kill(signal))
  return new Promise((resolve) => tap.on('close', (code) => resolve(code ?? 1)))
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exit(await main(process.argv.slice(2)))
