/**
 * Every scenario and tool of `npm run bench`, in the order a run takes them: the parts of the
 * shared deployment first (their rounds interleave), then the scenarios that set up their own.
 */
import { KIT_OPTIONS } from './kit/options.js'
import type { Options } from './args.js'
import type { Scenario } from './scenario.js'
import fill from '../scenarios/fill.js'
import verifyHot from '../scenarios/verify-hot.js'
import issueExisting from '../scenarios/issue-existing.js'
import issueNew from '../scenarios/issue-new.js'
import invalidate from '../scenarios/invalidate.js'
import proxy from '../scenarios/proxy.js'
import mixed from '../scenarios/mixed.js'
import verifyHotRevocations from '../scenarios/verify-hot-revocations.js'
import verifyHotSessions from '../scenarios/verify-hot-sessions.js'
import verifyCold from '../scenarios/verify-cold.js'
import cluster from '../scenarios/cluster.js'
import memory from '../scenarios/memory.js'
import recovery from '../scenarios/recovery.js'
import coldStart from '../scenarios/cold-start.js'
import revocationRestart from '../scenarios/revocation-restart.js'
import revocationCost from '../scenarios/revocation-cost.js'
import sessions from '../scenarios/sessions.js'
import busAck from '../scenarios/bus-ack.js'
import redisShapes from '../scenarios/redis-shapes.js'
import eventFanout from '../scenarios/event-fanout.js'
import webhookWrites from '../scenarios/webhook-writes.js'
import otelCost from '../scenarios/otel-cost.js'
import keyTiming from '../scenarios/key-timing.js'
import metricsCost from '../scenarios/metrics-cost.js'
import requestCosts from '../scenarios/request-costs.js'
import gcCount from '../scenarios/gc-count.js'
import instructions from '../scenarios/instructions.js'
import generatorInstructions from '../scenarios/generator-instructions.js'
import profile from '../tools/profile.js'

export const REGISTRY: Scenario[] = [
  fill,
  verifyHot,
  issueExisting,
  issueNew,
  invalidate,
  proxy,
  mixed,
  verifyHotRevocations,
  verifyHotSessions,
  verifyCold,
  cluster,
  memory,
  recovery,
  coldStart,
  revocationRestart,
  revocationCost,
  sessions,
  busAck,
  redisShapes,
  eventFanout,
  webhookWrites,
  otelCost,
  keyTiming,
  metricsCost,
  requestCosts,
  gcCount,
  instructions,
  generatorInstructions,
  profile,
]

/** What `npm run bench` runs with no name: what it ran before scenarios had names of their own. */
export const DEFAULT_SET = ['fill', 'verify-hot', 'issue-existing', 'issue-new', 'invalidate', 'proxy', 'mixed', 'verify-hot-sessions', 'verify-cold', 'cluster', 'memory', 'recovery', 'cold-start']

export const byName = new Map(REGISTRY.map((s) => [s.name, s]))

/** The options a scenario takes: a part of the shared deployment takes the deployment's too. */
export function optionsOf(scenario: Scenario): Options {
  return scenario.kind === 'kit' ? { ...KIT_OPTIONS, ...scenario.options } : scenario.options
}
