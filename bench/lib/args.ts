/**
 * The one argument parser of `npm run bench`: the runner's own flags, and the options every
 * scenario declares (name, type, default, smoke size, help). A flag means the same thing in
 * every scenario that takes it (`--users`, `--rounds`, `--pg-url`, …); each scenario gives
 * its own default, and the size `--smoke` uses instead.
 */
import { parseArgs } from 'node:util'

export const DEFAULT_PG_URL = 'postgres://root@127.0.0.1:5432/postgres'
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379'

export interface NumberOption<D extends number | undefined = number | undefined> {
  type: 'number'
  default: D
  /** the size under --smoke (the default's otherwise) */
  smoke?: number
  help: string
}
export interface StringOption<D extends string | undefined = string | undefined, C extends string = string> {
  type: 'string'
  default: D
  smoke?: D
  /** the values it takes, when it is a choice */
  choices?: readonly C[]
  help: string
}
export interface ListOption {
  type: 'list'
  help: string
}
export interface FlagOption {
  type: 'flag'
  /** set under --smoke */
  smoke?: boolean
  help: string
}
export type OptionSpec = NumberOption | StringOption | ListOption | FlagOption
export type Options = Record<string, OptionSpec>

/** What a scenario reads: each option as its parsed value. */
export type Values<O extends Options> = {
  [K in keyof O]: O[K] extends NumberOption<infer D>
    ? D extends number
      ? number
      : number | undefined
    : O[K] extends StringOption<infer D, infer C>
      ? D extends string
        ? C
        : C | undefined
      : O[K] extends ListOption
        ? string[]
        : boolean
}

export function number(help: string, defaults: { default: number; smoke?: number }): NumberOption<number>
/** Without a default: undefined unless given (or its smoke size under --smoke). */
export function number(help: string, defaults?: { smoke?: number }): NumberOption<undefined>
export function number(help: string, defaults?: { default?: number; smoke?: number }): NumberOption {
  return { type: 'number', default: defaults?.default, smoke: defaults?.smoke, help }
}
export function string(help: string, defaults: { default: string; smoke?: string }): StringOption<string, string>
export function string(help: string): StringOption<undefined, string>
export function string(help: string, defaults?: { default: string; smoke?: string }): StringOption {
  return { type: 'string', default: defaults?.default, smoke: defaults?.smoke, help }
}
/** One of `choices`. */
export function choice<const C extends string>(help: string, choices: readonly C[], byDefault: C, smoke?: C): StringOption<C, C> {
  return { type: 'string', default: byDefault, smoke, choices, help }
}
export const list = (help: string): ListOption => ({ type: 'list', help })
export const flag = (help: string, smoke?: boolean): FlagOption => ({ type: 'flag', smoke, help })

/** Options many scenarios take, each with that scenario's default. */
export const common = {
  pgUrl: () => string('PostgreSQL server for scratch databases', { default: DEFAULT_PG_URL }),
  redisUrl: () => string('Redis server', { default: DEFAULT_REDIS_URL }),
  rounds: (byDefault: number, smoke = 1) => number('rounds, interleaved so that a noisy neighbour hits every variant alike', { default: byDefault, smoke }),
  duration: (byDefault: number, smoke = 0.5) => number('seconds of load per run', { default: byDefault, smoke }),
  warmup: (byDefault: number, smoke = 0.05) => number('seconds of warm-up before each run', { default: byDefault, smoke }),
  connections: (byDefault: number, smoke = 10) => number('connections of the load generator (autocannon, pipelining 1)', { default: byDefault, smoke }),
  users: (byDefault: number, smoke?: number) => number('users', { default: byDefault, smoke }),
  hot: (byDefault: number, smoke?: number) => number("verify-hot's working set (users)", { default: byDefault, smoke }),
  host: () => string("another build's dist/bench/node-host.js, for a before and an after in one sitting"),
  keep: () => flag('keep the scratch databases and data directories'),
}

/** The runner's own flags. */
export const GLOBAL_OPTIONS = {
  list: flag('list every scenario and tool, one line each'),
  help: flag('this help; with names, their options'),
  smoke: flag('each scenario at a tiny size, a few seconds: proves the wiring, measures nothing'),
  markdown: flag('print the report as Markdown'),
  json: string('write the whole report, every raw number, as JSON to FILE'),
  skip: string('comma-separated scenarios left out of the default set (or of the named ones)'),
} satisfies Options

export const kebab = (key: string) => key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase())

export interface ParsedArgs {
  /** positionals, in order */
  positionals: string[]
  /** every flag given, by option key (camelCase), as parseArgs read it */
  given: Record<string, string | string[] | boolean>
  global: Values<typeof GLOBAL_OPTIONS>
}

/**
 * Reads argv against the runner's flags and every option of `declared` (by key). A flag
 * declared twice must have the same type everywhere. Unknown flags are refused.
 */
export function parseArgv(argv: string[], declared: Options[]): ParsedArgs {
  const union: Options = { ...GLOBAL_OPTIONS }
  for (const options of declared) {
    for (const [key, spec] of Object.entries(options)) {
      const seen = union[key]
      if (seen && seen.type !== spec.type) throw new Error(`--${kebab(key)} is declared as a ${seen.type} and as a ${spec.type}`)
      union[key] ??= spec
    }
  }
  const config = Object.fromEntries(
    Object.entries(union).map(([key, spec]) => [kebab(key), spec.type === 'flag' ? { type: 'boolean' as const } : spec.type === 'list' ? { type: 'string' as const, multiple: true } : { type: 'string' as const }]),
  )
  const { values, positionals } = parseArgs({ args: argv, options: config, allowPositionals: true, strict: true })
  const given: ParsedArgs['given'] = {}
  const camel = new Map(Object.keys(union).map((key) => [kebab(key), key]))
  for (const [name, value] of Object.entries(values)) if (value !== undefined) given[camel.get(name)!] = value as string | string[] | boolean
  const global = resolve(GLOBAL_OPTIONS, given, false)
  return { positionals, given, global }
}

/** One scenario's values: what was given, else its smoke size under --smoke, else its default. */
export function resolve<O extends Options>(options: O, given: ParsedArgs['given'], smoke: boolean): Values<O> {
  const out: Record<string, unknown> = {}
  for (const [key, spec] of Object.entries(options)) {
    const raw = given[key]
    const flagName = '--' + kebab(key)
    switch (spec.type) {
      case 'flag':
        out[key] = raw === true || (raw === undefined && smoke && spec.smoke === true)
        break
      case 'list':
        out[key] = (raw as string[] | undefined) ?? []
        break
      case 'number': {
        if (raw === undefined) {
          out[key] = smoke && spec.smoke !== undefined ? spec.smoke : spec.default
          break
        }
        const n = Number(raw)
        if (raw === '' || !Number.isFinite(n)) throw new Error(`${flagName}: a number, not ${JSON.stringify(raw)}`)
        out[key] = n
        break
      }
      case 'string': {
        const value = (raw as string | undefined) ?? (smoke && spec.smoke !== undefined ? spec.smoke : spec.default)
        if (value !== undefined && spec.choices && !spec.choices.includes(value)) throw new Error(`${flagName}: one of ${spec.choices.join(', ')}, not ${JSON.stringify(value)}`)
        out[key] = value
        break
      }
    }
  }
  return out as Values<O>
}

/** The help lines of some options: flag, what it is, its default and smoke size. */
export function optionHelp(options: Options, skip: ReadonlySet<string> = new Set()): string[] {
  return Object.entries(options)
    .filter(([key]) => !skip.has(key))
    .map(([key, spec]) => {
      const word = /url$/i.test(key) ? 'URL' : /skip|kinds/i.test(key) ? 'LIST' : /json|readme|host|cli|before/i.test(key) ? 'FILE' : /dumps/i.test(key) ? 'DIR' : 'V'
      const value = spec.type === 'flag' ? '' : spec.type === 'list' ? ` ${word} (repeatable)` : spec.type === 'string' && spec.choices ? ` ${spec.choices.join('|')}` : spec.type === 'number' ? ' N' : ` ${word}`
      const defaults =
        spec.type === 'number' || spec.type === 'string'
          ? [spec.default !== undefined ? `default ${spec.default}` : '', spec.smoke !== undefined ? `smoke ${spec.smoke}` : ''].filter(Boolean).join(', ')
          : spec.type === 'flag' && spec.smoke
            ? 'set under --smoke'
            : ''
      return `  ${('--' + kebab(key) + value).padEnd(34)} ${spec.help}${defaults ? ` (${defaults})` : ''}`
    })
}
