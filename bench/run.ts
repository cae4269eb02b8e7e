/**
 * `npm run bench -- [NAME…] [options]`: every scenario and tool of the kit, one argument
 * parser (bench/lib/args.ts), one report (bench/lib/report.ts). See bench/README.md and
 * `npm run bench -- --help`.
 */
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { helpText, listText, makePlan, readArgs, type Plan } from './lib/plan.js'
import { renderReport, type Report } from './lib/report.js'
import { runPlan, stopOnSignals } from './lib/runner.js'

async function main(): Promise<number> {
  const args = readArgs(process.argv.slice(2))
  if (args.global.help) return print(helpText(args))
  if (args.global.list) return print(listText())
  const plan = makePlan(args)
  if (needsExposedGc(plan)) return restartWithExposedGc()
  stopOnSignals()
  const report = await runPlan(plan)
  writeReport(report, plan)
  return Object.keys(report.failed).length ? 1 : 0
}

function print(text: string): number {
  process.stdout.write(text)
  return 0
}

/** A scenario that measures the heap calls gc(): the runner then runs itself again with --expose-gc. */
function needsExposedGc(plan: Plan): boolean {
  return plan.scenarios.some((s) => s.exposeGc) && typeof (globalThis as { gc?: unknown }).gc !== 'function'
}

function restartWithExposedGc(): Promise<number> {
  const child = spawn(process.execPath, ['--expose-gc', ...process.execArgv, process.argv[1]!, ...process.argv.slice(2)], { stdio: 'inherit' })
  // Ctrl-C reaches the child through the terminal's process group; a SIGTERM sent to us alone is passed on
  process.on('SIGTERM', () => child.kill('SIGTERM'))
  process.on('SIGINT', () => {})
  return new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 130 : 1))))
}

function writeReport(report: Report, plan: Plan): void {
  process.stdout.write(renderReport(report, plan.args.global.markdown) + '\n')
  if (plan.args.global.json) writeFileSync(plan.args.global.json, JSON.stringify(report, null, 2))
}

let exitCode = 1
try {
  exitCode = await main()
} catch (error) {
  process.stderr.write(`bench: ${error instanceof Error ? error.message : String(error)}\n`)
  exitCode = 2
}
process.exit(exitCode)
