/**
 * From the command line to what runs: the named scenarios (or the default set, or `all`),
 * each with what it requires, without `--skip`; under `--smoke`, those that cannot be smoked
 * cheaply left out with their reason. Also the texts of `--help` and `--list`.
 */
import { GLOBAL_OPTIONS, kebab, optionHelp, parseArgv, type ParsedArgs } from './args.js'
import { KIT_OPTIONS } from './kit/options.js'
import { byName, DEFAULT_SET, optionsOf, REGISTRY } from './registry.js'
import type { Scenario } from './scenario.js'

export interface Plan {
  args: ParsedArgs
  /** what runs, in registry order */
  scenarios: Scenario[]
  /** named (or in the set) but not run, and why */
  skipped: Record<string, string>
  /** positionals that name no scenario: a tool's files */
  files: string[]
}

export function readArgs(argv: string[]): ParsedArgs {
  return parseArgv(argv, REGISTRY.map(optionsOf))
}

/** The names the command line selects: the default set unless some are named; `all`: every scenario (not the tools). */
function namesOf(args: ParsedArgs): { names: string[]; files: string[] } {
  const named = args.positionals.filter((p) => p === 'all' || byName.has(p))
  const files = args.positionals.filter((p) => !named.includes(p))
  const names = named.includes('all') ? REGISTRY.filter((s) => s.kind !== 'tool').map((s) => s.name) : named.length ? named : DEFAULT_SET
  return { names, files }
}

export function makePlan(args: ParsedArgs): Plan {
  const { names, files } = namesOf(args)
  const skip = new Set(args.global.skip?.split(',').map((s) => s.trim()).filter(Boolean) ?? [])
  for (const name of skip) if (!byName.has(name)) throw new Error(`--skip: unknown scenario ${name} (npm run bench -- --list)`)
  const wanted = new Set(names.filter((name) => !skip.has(name)))
  for (const name of [...wanted]) {
    const s = byName.get(name)!
    if (s.kind === 'kit') for (const required of s.requires ?? []) wanted.add(required)
  }
  const chosen = REGISTRY.filter((s) => wanted.has(s.name))
  if (files.length && !chosen.some((s) => s.kind === 'tool')) throw new Error(`unknown scenario ${files[0]} (npm run bench -- --list)`)
  checkFlags(args, chosen)
  const skipped: Record<string, string> = {}
  const scenarios = chosen.filter((s) => {
    if (!args.global.smoke || s.smoke === true) return true
    skipped[s.name] = `no --smoke: ${s.smoke}`
    return false
  })
  return { args, scenarios, skipped, files }
}

/** Every flag given is taken by a scenario that runs: a flag for another would silently do nothing. */
function checkFlags(args: ParsedArgs, chosen: Scenario[]): void {
  const taken = new Set([...Object.keys(GLOBAL_OPTIONS), ...chosen.flatMap((s) => Object.keys(optionsOf(s)))])
  for (const key of Object.keys(args.given)) {
    if (taken.has(key)) continue
    const takers = REGISTRY.filter((s) => key in optionsOf(s)).map((s) => s.name)
    throw new Error(`--${kebab(key)} is not an option of ${chosen.map((s) => s.name).join(', ') || 'what runs'} (it is one of ${takers.join(', ')}; npm run bench -- NAME --help)`)
  }
}

export function listText(): string {
  const width = Math.max(...REGISTRY.map((s) => s.name.length)) + 2
  const line = (s: Scenario) => `${DEFAULT_SET.includes(s.name) ? '*' : ' '} ${s.name.padEnd(width)}${s.description}${s.smoke === true || s.kind === 'tool' ? '' : ' [no --smoke]'}`
  return [
    '* the default set of `npm run bench`; [no --smoke]: too dear to smoke (`--help NAME` says why)',
    '',
    'parts of the shared deployment (one node, its baselines, the parts named run in the same interleaved rounds):',
    ...REGISTRY.filter((s) => s.kind === 'kit').map(line),
    '',
    'scenarios with a set-up of their own:',
    ...REGISTRY.filter((s) => s.kind === 'scenario').map(line),
    '',
    'tools:',
    ...REGISTRY.filter((s) => s.kind === 'tool').map(line),
    '',
  ].join('\n')
}

export function helpText(args: ParsedArgs): string {
  const { names } = namesOf(args)
  const chosen = REGISTRY.filter((s) => names.includes(s.name))
  const out = [
    'npm run bench -- [NAME…] [options]',
    '',
    'Runs the named scenarios (default: the default set, * in --list; `all`: every scenario), each against its',
    'baselines measured in the same run, and prints one report (Markdown with --markdown, JSON with --json FILE).',
    '',
    '  npm run bench                          the default set (~6 min; not on a machine others use)',
    '  npm run bench -- verify-hot mixed      those two, on one deployment',
    '  npm run bench -- --smoke               the default set at a tiny size (all: every scenario)',
    '  npm run bench -- NAME --help           what NAME takes',
    '',
    'runner',
    ...optionHelp(GLOBAL_OPTIONS),
  ]
  const shown = new Set<string>()
  const parts = chosen.filter((s) => s.kind === 'kit')
  if (parts.length) {
    out.push('', `the shared deployment (${parts.map((s) => s.name).join(', ')})`, ...optionHelp(KIT_OPTIONS))
    for (const key of Object.keys(KIT_OPTIONS)) shown.add(key)
  }
  for (const s of chosen) {
    const lines = optionHelp(s.options, s.kind === 'kit' ? shown : new Set())
    const smoke = s.smoke === true || s.kind === 'tool' ? '' : ` (no --smoke: ${s.smoke})`
    if (lines.length || smoke) out.push('', `${s.name}${s.kind === 'kit' ? " (besides the deployment's)" : ''}${smoke}`, ...lines)
  }
  return out.join('\n') + '\n'
}
