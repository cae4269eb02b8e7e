import { spawn } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

/**
 * Which tests `npm test` runs, and in which of its two passes (one per store, `TEST_STORE`,
 * side by side): the folder a test is in says, and nothing else does.
 *
 * | folder | runs |
 * |---|---|
 * | `test/stores/` | in both passes: its tests use the pass's store (PGlite, then PostgreSQL), and what they assert depends on it: rows written and read back, versions, the event log, the outbox |
 * | `test/in-process/` | once, in the PostgreSQL pass: nodes in the test's process, where which store holds the rows changes nothing asserted (verification, input checks, the client, slow clients) |
 * | `test/system/` | once, in the PostgreSQL pass: real processes, and databases, Redis and peers of their own |
 * | `test/unit/` | once, in the PGlite pass (the one that ends first): no store at all |
 * | `test/embedded/` | once, in the PGlite pass: the embedded store's data directory itself |
 * | `test/chaos/`, `test/slow/` | not at all: `npm run test:chaos`, `npm run test:slow` (minutes each) |
 *
 * A folder holding an `all.test.ts` runs as one process (test/support/suite.ts): only that
 * file of it is listed. `support/` folders hold no tests.
 */
export type Store = 'pglite' | 'postgres'

/**
 * The file that makes a folder one process (test/support/suite.ts). Declared here, not
 * imported from there: that module loads tap, whose root test would then live in this
 * process too and, 30 s in, end it with SIGALRM while the pass still runs.
 */
export const SUITE_FILE = 'all.test.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export const PASSES: Record<Store, { folders: readonly string[]; jobs: number }> = {
  // test/unit/ needs no store: it runs in the pass that ends first.
  pglite: { folders: ['test/stores', 'test/embedded', 'test/unit'], jobs: 2 },
  // Its files wait most (leases, drains, webhook retries, failovers): four at a time keep the
  // cores busy while they wait. Measured peak: 79 of PostgreSQL's default 100 connections.
  postgres: { folders: ['test/stores', 'test/in-process', 'test/system'], jobs: 4 },
}

/** The test files under `folder`, a folder with an all.test.ts as that one file. */
export function testFilesIn(folder: string): string[] {
  const dir = join(ROOT, folder)
  if (!existsSync(dir)) return []
  const names = readdirSync(dir).sort()
  if (names.includes(SUITE_FILE)) return [`${folder}/${SUITE_FILE}`]
  return names.flatMap((name) => {
    if (name === 'support') return []
    const path = `${folder}/${name}`
    if (statSync(join(ROOT, path)).isDirectory()) return testFilesIn(path)
    return name.endsWith('.test.ts') ? [path] : []
  })
}

/**
 * Largest first, by bytes of test code (a folder run as one process counts whole): tap
 * starts them in this order, and a long file started last would end the pass alone while
 * the cores it could share stand idle. Size is a rough measure of time, but one that needs
 * no record of earlier runs.
 */
function longestFirst(files: string[]): string[] {
  const bytes = (file: string) => {
    if (!file.endsWith(`/${SUITE_FILE}`)) return statSync(join(ROOT, file)).size
    const dir = join(ROOT, dirname(file))
    return readdirSync(dir).filter((name) => name.endsWith('.test.ts')).reduce((sum, name) => sum + statSync(join(dir, name)).size, 0)
  }
  const sized = files.map((file) => ({ file, size: bytes(file) }))
  return sized.sort((a, b) => b.size - a.size).map(({ file }) => file)
}

/**
 * The files of `store`'s pass; with `only`, those of them that it names (a file of a folder
 * that runs as one process is run alone, in the passes its folder runs in).
 */
export function filesOf(store: Store, only?: string[]): string[] {
  const folders = PASSES[store].folders
  if (only === undefined) return longestFirst(folders.flatMap(testFilesIn))
  return only.filter((file) => folders.some((folder) => file.startsWith(folder + '/')))
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
  const named = rest.filter((arg) => arg.endsWith('.test.ts')).map((arg) => relative(ROOT, resolve(arg)))
  const options = rest.filter((arg) => !arg.endsWith('.test.ts') && arg !== '--list')
  const files = filesOf(store, named.length > 0 ? named : undefined)
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
