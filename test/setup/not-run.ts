import { appendFileSync, existsSync, readFileSync } from 'node:fs'

/**
 * The tests that skipped for want of a program: each such skip is a line in a log that
 * `npm test` names in the environment of its passes, and reads back for one summary at the
 * end of the run. Under CI, a test that did not run fails the run.
 */
export const NOT_RUN_LOG_VARIABLE = 'TEST_NOT_RUN_LOG'

export interface NotRun {
  /** the test file, from the package root */
  file: string
  /** the programs it lacked */
  tools: string[]
  /** its skip reason */
  reason: string
}

/** Records a skip, when `npm test` collects them. */
export function recordNotRun(entry: NotRun): void {
  const log = process.env[NOT_RUN_LOG_VARIABLE]
  if (log) appendFileSync(log, JSON.stringify(entry) + '\n')
}

export function readNotRun(log: string): NotRun[] {
  if (!existsSync(log)) return []
  const lines = readFileSync(log, 'utf8').split('\n').filter(Boolean)
  return [...new Set(lines)].map((line) => JSON.parse(line) as NotRun).sort((a, b) => a.file.localeCompare(b.file))
}

/** CI=true (or 1): the run must show every test ran. */
export const underCi = (env: NodeJS.ProcessEnv = process.env) => /^(true|1)$/i.test(env.CI ?? '')

/**
 * The summary's lines (none when every test ran) and whether it fails the run. `whyMissing`
 * says why the setup could not install each program.
 */
export function notRunSummary(notRun: NotRun[], whyMissing: Record<string, string | undefined>, ci: boolean): { lines: string[]; fails: boolean } {
  if (notRun.length === 0) return { lines: [], fails: false }
  const lines = [`not run: tests of ${notRun.length} file${notRun.length === 1 ? '' : 's'}, for want of a program`]
  for (const { file, reason } of notRun) lines.push(`  ${file}: ${reason}`)
  const tools = [...new Set(notRun.flatMap((entry) => entry.tools))].filter((tool) => whyMissing[tool])
  if (tools.length > 0) lines.push(`why the setup did not install ${tools.length === 1 ? 'it' : 'them'}:`, ...tools.map((tool) => `  ${tool}: ${whyMissing[tool]}`))
  if (ci) lines.push('CI is set: a test that did not run fails the run')
  return { lines, fails: ci }
}
