import { readdirSync } from 'node:fs'
import t from 'tap'
import { SUITE_FILE } from '../setup/passes.js'
import { SUITE_FILE_VARIABLE } from '../setup/tools.js'

/**
 * Runs every `*.test.ts` of `dir` in this one process. A test file on its own pays for a
 * Node and tap start, the first compile of every route schema and, in the PGlite pass,
 * loading PGlite's WASM: seconds of CPU, more than most in-process test files spend on
 * their tests, and the suite is CPU-bound. Each file's import is a test of its own, so that
 * the root test lives until the last file has queued its tests; the files' tests then run
 * in file order, each on the nodes its file started, as they would alone. A file still runs
 * alone too: `TEST_STORE=pglite npx tap test/stores/api/tokens/token.test.ts`. A folder runs this
 * way when it holds an `all.test.ts` that calls this; npm test then lists only that file of it.
 */

export function runTestFilesOf(dir: URL): void {
  // the default is per file; these are many files
  t.setTimeout(600_000)
  const files = readdirSync(dir).filter((name) => name.endsWith('.test.ts') && name !== SUITE_FILE).sort()
  if (files.length === 0) throw new Error(`no test files in ${dir.pathname}`)
  for (const file of files) {
    const name = new URL(file, dir).pathname.replace(/^.*\/test\//, 'test/')
    t.test(name, async () => {
      // a test skipped for a missing program is reported under this file's name (tools.ts)
      process.env[SUITE_FILE_VARIABLE] = name
      try {
        await import(new URL(file, dir).href)
      } finally {
        delete process.env[SUITE_FILE_VARIABLE]
      }
    })
  }
}
