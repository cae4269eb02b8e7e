import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { NOT_RUN_LOG_VARIABLE, notRunSummary, readNotRun, underCi } from './not-run.js'
import { prepare } from './prepare.js'
import { sideBySide } from './side-by-side.js'

/**
 * `npm test`: sets up what the suite needs (prepare.ts), builds the package and tap's
 * runner for the configured plugins side by side (`npm run test:plugins`: tap does that
 * on its own only at the start of a run, whose test files would still load ts-node), runs
 * the two passes side by side (passes.ts), then says which tests did not run and why.
 * Arguments go to both passes: `npm test -- test/system/browser/docs-page.test.ts` runs that file in
 * the passes the store matrix puts it in.
 */
const prepared = await prepare()
if (prepared.fatal) {
  console.log('no test ran: every pass needs PostgreSQL and Redis')
  process.exit(1)
}

const logDir = mkdtempSync(join(tmpdir(), 'chat-auth-not-run-'))
process.env[NOT_RUN_LOG_VARIABLE] = join(logDir, 'not-run.jsonl')
let code = await sideBySide(['build', 'test:plugins'])
if (code === 0) code = await sideBySide(['test:pglite', 'test:postgres'], process.argv.slice(2))

const summary = notRunSummary(readNotRun(process.env[NOT_RUN_LOG_VARIABLE]), prepared.notInstalled, underCi())
rmSync(logDir, { recursive: true, force: true })
for (const line of summary.lines) console.log(line)
process.exit(code !== 0 ? code : summary.fails ? 1 : 0)
