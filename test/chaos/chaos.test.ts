import t, { type Test } from 'tap'
import { call } from '../support/http-client.js'
import { startSentinelSet } from '../support/services.js'
import { check, type Result } from './lib/checks.js'
import { drive } from './lib/driver.js'
import { FAULTS, selected, SENTINEL_FAULTS } from './lib/faults.js'
import { afterAcknowledgement } from './lib/probes/after-ack.js'
import { closedInCohort } from './lib/probes/cohort.js'
import { revocationsWhileLoading } from './lib/probes/filter-load.js'
import { missedMessages } from './lib/probes/missed-messages.js'
import { revokedPastExp } from './lib/probes/past-exp.js'
import { receiptsHold } from './lib/probes/receipts.js'
import type { Log, ProbeResult } from './lib/probes/probe.js'
import { splitBrainWrites } from './lib/probes/split-brain.js'
import { unpublishedCommit } from './lib/probes/unpublished-commit.js'
import { webhookRetries } from './lib/probes/webhooks.js'
import { chaosServices, setUp, setUpSentinel, tearDown, type Scenario } from './lib/scenario.js'

/**
 * `npm run test:chaos` — not part of `npm test` (tap's `exclude` skips test/chaos/): the safe
 * runs, which must find no violation.
 *
 * The plain shape (lib/scenario.ts: Redis through TCP proxies, PostgreSQL of its own, three
 * nodes with skewed clocks) carries the general load (lib/driver.ts) while the faults of
 * lib/faults.ts are injected one after another, and the checker (lib/checks.ts) turns what it
 * recorded into violations: stale or revoked tokens accepted, sessions left open, events not
 * on a stream or never delivered to a webhook. Then, on the same nodes, every targeted probe
 * (lib/probes/) runs: each aims at one mechanism on purpose, and finds violations every time
 * on the nodes of its mutant (mutants.test.ts). The Sentinel shape carries the same load
 * through failovers, then its split-brain probe.
 */
const services = chaosServices(t)

const PROBES: Array<(s: Scenario, log: Log) => Promise<ProbeResult>> = [missedMessages, unpublishedCommit, revocationsWhileLoading, revokedPastExp, afterAcknowledgement, closedInCohort, webhookRetries, receiptsHold]

/** The load did run, and found nothing. */
function loadRan(t: Test, result: Result, faults: number): void {
  t.equal(result.faults, faults, 'every fault was injected')
  t.ok(result.invalidationsOk > 100 && result.accepted > 1000, 'the load did run')
}

t.test('plain shape', async (t) => {
  const s = await setUp(services, await services.createDatabase('chaos_safe'), undefined)
  t.teardown(() => tearDown(s))

  await t.test('under faults, no node accepts a token whose invalidation had answered', async (t) => {
    const faults = selected(FAULTS)
    const log = (line: string) => t.comment(line)
    const result = check(await drive(s, faults, log), log)
    loadRan(t, result, faults.length)
    t.ok(result.tokenRevocationsOk > 50 && result.companyRevocationsOk > 5, 'revocations did run')
    t.ok(result.expiringRevocationsOk > 50, `revocations of tokens near their exp did run (${result.expiringRevocationsOk})`)
    t.ok(result.sessions.checked > 50, `sessions ended by revocations were checked (${result.sessions.checked})`)
    t.equal(result.byKind.session, 0, `sessions still open after the revocation that ended them answered: ${result.byKind.session}`)
    t.ok(result.stream.checked > 300, `events checked on the nodes' streams right after their 200 (${result.stream.checked})`)
    t.equal(result.byKind.stream, 0, `events not on a node's stream when their write answered: ${result.byKind.stream}`)
    t.ok(result.webhooks.events > 300 && result.webhooks.failedOnPurpose > 20, `webhooks: ${result.webhooks.events} events, ${result.webhooks.failedOnPurpose} attempts refused on purpose`)
    t.equal(result.byKind.webhook, 0, `events never accepted by the webhook receiver: ${result.byKind.webhook}`)
    t.equal(result.violations, 0, `violations: ${result.violations}`)
    const metrics = await Promise.all(s.nodes.map((n) => call(n.url, 'GET', '/metrics')))
    for (const [i, m] of metrics.entries()) {
      const pick = (name: string) =>
        String(m.body)
          .split('\n')
          .filter((l) => l.startsWith(name))
          .join(', ')
      t.comment(`node-${i}: ${pick('chat_auth_bus_publishes_total')} | ${pick('chat_auth_bus_ack_latency_seconds')}`)
    }
  })

  for (const probe of PROBES) {
    await t.test(`the probe ${probe.name} finds no violation`, async (t) => {
      const result = await probe(s, (line) => t.comment(line))
      t.ok(result.checked > 0, `it checked something (${result.checked})`)
      t.equal(result.violations, 0, `violations: ${result.violations}`)
    })
  }
})

t.test('Sentinel shape', async (t) => {
  const set = await startSentinelSet()
  t.teardown(() => set.stop())
  const s = await setUpSentinel(set, services.postgres, await services.createDatabase('chaos_sentinel'), undefined)
  t.teardown(() => Promise.allSettled(s.nodes.map((n) => n.stop())))

  await t.test('through failovers, no node accepts a token whose invalidation had answered', async (t) => {
    const faults = selected(SENTINEL_FAULTS, 'CHAOS_SENTINEL_FAULTS')
    const log = (line: string) => t.comment(line)
    const result = check(await drive(s, faults, log, { sampleReadiness: true }), log)
    loadRan(t, result, faults.length)
    t.equal(result.violations, 0, `violations: ${result.violations}`)
  })

  await t.test('the probe splitBrainWrites finds no violation', async (t) => {
    const result = await splitBrainWrites(s, (line) => t.comment(line))
    t.ok(result.checked > 0, `it checked something (${result.checked})`)
    t.equal(result.violations, 0, `violations: ${result.violations}`)
  })
})
