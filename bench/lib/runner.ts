/**
 * Runs a plan: the shared deployment's parts together (bench/lib/kit/run-kit.ts), every other
 * scenario on its own, each with a context whose clean-ups run when it ends, however it ends
 * (and on Ctrl-C); a scenario that fails is reported as failed and the others still run.
 */
import { resolve } from './args.js'
import { firstLine } from './kit/kit.js'
import { kitGroups, runKit } from './kit/run-kit.js'
import type { Plan } from './plan.js'
import { machineLine, type Report, type Section } from './report.js'
import { Skip, type Context, type KitPart, type Standalone } from './scenario.js'

const log = (line: string) => process.stderr.write(line + '\n')

/** The clean-ups of the scenario running now, for Ctrl-C. */
let current: Array<() => unknown> = []

async function cleanUp(cleanups: Array<() => unknown>): Promise<void> {
  for (const step of cleanups.splice(0).reverse()) {
    try {
      await step()
    } catch (error) {
      log(`clean-up: ${firstLine(error)}`)
    }
  }
}

export function stopOnSignals(): void {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      log(`\n${signal}: stopping what runs, dropping the scratch databases`)
      void cleanUp(current).finally(() => process.exit(130))
    })
  }
}

/** Runs `body` with a fresh context; what it deferred runs after it, and the tails of what it watched are printed if it failed. */
async function withContext<T>(plan: Plan, opts: unknown, body: (ctx: Context<any>) => Promise<T>): Promise<T> {
  const cleanups: Array<() => unknown> = []
  const watched: Array<{ name: string; output(): string }> = []
  current = cleanups
  const ctx: Context<unknown> = {
    opts,
    smoke: plan.args.global.smoke,
    files: plan.files,
    log,
    defer: (cleanup) => void cleanups.push(cleanup),
    watch: (proc) => void watched.push(proc),
  }
  try {
    return await body(ctx)
  } catch (error) {
    if (!(error instanceof Skip)) {
      log(`\nfailed: ${error instanceof Error ? error.stack : String(error)}`)
      for (const p of watched) log(`--- ${p.name} output (tail) ---\n${p.output().slice(-2000)}`)
    }
    throw error
  } finally {
    await cleanUp(cleanups)
  }
}

export async function runPlan(plan: Plan): Promise<Report> {
  const started = Date.now()
  const argv = process.argv.slice(2)
  const report: Report = {
    command: 'npm run bench' + (argv.length ? ' -- ' + argv.join(' ') : ''),
    machine: machineLine(),
    smoke: plan.args.global.smoke,
    ran: [],
    skipped: { ...plan.skipped },
    failed: {},
    sections: [],
    durations: {},
    elapsedS: 0,
  }
  const parts = plan.scenarios.filter((s): s is KitPart => s.kind === 'kit')
  for (const group of parts.length ? kitGroups(parts) : []) await runGroup(plan, group, report)
  for (const scenario of plan.scenarios) if (scenario.kind !== 'kit') await runOne(plan, scenario, report)
  report.elapsedS = (Date.now() - started) / 1000
  return report
}

async function runGroup(plan: Plan, group: KitPart[], report: Report): Promise<void> {
  const names = group.map((p) => p.name)
  log(`\n── ${names.join(', ')}: one deployment ──`)
  const started = Date.now()
  try {
    const outcome = await withContext(plan, undefined, (ctx) => runKit(ctx, group, plan.args.given))
    Object.assign(report.skipped, outcome.skipped)
    report.ran.push(...names.filter((name) => !(name in outcome.skipped) && !report.ran.includes(name)))
    report.sections.push(...outcome.sections)
  } catch (error) {
    for (const name of names) report.failed[name] = firstLine(error)
  } finally {
    report.durations[names.join(', ')] = (Date.now() - started) / 1000
  }
}

async function runOne(plan: Plan, scenario: Standalone, report: Report): Promise<void> {
  log(`\n── ${scenario.name} ──`)
  const opts = resolve(scenario.options, plan.args.given, plan.args.global.smoke)
  const started = Date.now()
  try {
    const section: Section = await withContext(plan, opts, (ctx) => scenario.run(ctx))
    report.ran.push(scenario.name)
    report.sections.push(section)
  } catch (error) {
    if (error instanceof Skip) report.skipped[scenario.name] = error.message
    else report.failed[scenario.name] = firstLine(error)
  } finally {
    report.durations[scenario.name] = (Date.now() - started) / 1000
  }
}
