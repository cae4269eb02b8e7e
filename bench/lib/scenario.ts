/**
 * What every entry of `npm run bench` is: a name, a line of description, the options it
 * takes, and either
 *
 * - `run(context)`: a scenario (or tool) that sets up what it measures and its baseline
 *   itself and returns its section of the report; or
 * - `kit`: a part of the shared deployment (bench/lib/kit/): one node on a scratch database,
 *   its baselines (bare Fastify, a naive verifier, a plain UPDATE) and one data set, every
 *   part measured in the same interleaved rounds, so that each ratio to a baseline pairs runs
 *   that met the same moments of a shared machine. Its rows join the deployment's one table.
 */
import type { Options, Values } from './args.js'
import type { Check, Section } from './report.js'
import type { Kit, KitView } from './kit/kit.js'
import type { KIT_OPTIONS } from './kit/options.js'

export interface Context<V> {
  opts: V
  smoke: boolean
  /** positionals that name no scenario (a tool's files) */
  files: string[]
  log(line: string): void
  /** run when the scenario ends, however it ends (last registered first), and on Ctrl-C */
  defer(cleanup: () => unknown): void
  /** a process whose output's tail is printed should the scenario fail */
  watch(proc: { name: string; output(): string }): void
}

/** Thrown by a scenario that cannot run here (a program missing, a target it cannot take): reported as skipped, with the reason. */
export class Skip extends Error {}

interface Base<O extends Options> {
  name: string
  /** one line, for --list */
  description: string
  options: O
  /** true: --smoke runs it at its options' smoke sizes; a string: why it cannot be smoked cheaply */
  smoke: true | string
  /** it measures the heap: the runner starts itself with --expose-gc */
  exposeGc?: boolean
}

export interface Standalone<O extends Options = Options> extends Base<O> {
  kind: 'scenario' | 'tool'
  run(ctx: Context<Values<O>>): Promise<Section>
}

/** A row of the deployment's table: a key of its results and its label. */
export interface KitRow {
  key: string
  label: string | ((view: KitView) => string)
  /** its answers are judged: the `wrong` column counts */
  judged?: boolean
}

export type KitValues<O extends Options> = Values<O & typeof KIT_OPTIONS>

export interface KitPart<O extends Options = Options> extends Base<O> {
  kind: 'kit'
  /** other parts it is compared with, run with it whether named or not */
  requires?: string[]
  /** it changes the data every part after it would judge by (a company revoke): it runs in a deployment of its own but with the parts named here */
  apart?: string[]
  /** its data is prepared with SQL and signed by the kit (`--prepare auto` picks it) */
  needsSql?: boolean
  /** variables of the node under test, beside the kit's */
  mainEnv?(opts: KitValues<O>): Record<string, string | undefined>
  /** once the deployment is up, before the rounds */
  prepare?(kit: Kit, opts: KitValues<O>): Promise<void>
  /** its measured runs of round `round` (1-based), after bare Fastify's and the naive verifier's, in registry order */
  round?(kit: Kit, opts: KitValues<O>, round: number): Promise<void>
  /** after every round: phases that change the deployment (the node replaced, stopped, more nodes) */
  after?(kit: Kit, opts: KitValues<O>): Promise<void>
  rows?: KitRow[]
  /** its rows in the table of each round against the bare round before it */
  roundRows?: KitRow[]
  checks?(view: KitView, opts: KitValues<O>): Check[]
  /** tables of its own in the deployment's section */
  tables?(view: KitView, opts: KitValues<O>): Section['tables']
  /** sections of its own after the deployment's */
  sections?(view: KitView, opts: KitValues<O>): Section[]
}

export type Scenario = Standalone<any> | KitPart<any>

export const defineScenario = <O extends Options>(s: Omit<Standalone<O>, 'kind'> & { kind?: 'scenario' }): Standalone<O> => ({ ...s, kind: 'scenario' })
export const defineTool = <O extends Options>(s: Omit<Standalone<O>, 'kind' | 'smoke'>): Standalone<O> => ({ ...s, kind: 'tool', smoke: 'a tool, not a measurement' })
export const defineKitPart = <O extends Options>(s: Omit<KitPart<O>, 'kind'>): KitPart<O> => ({ ...s, kind: 'kit' })
