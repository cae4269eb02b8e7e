import t from 'tap'
import { startSentinelSet } from '../support/services.js'
import { mutantCalls, type Mutant } from './lib/nodes.js'
import { afterAcknowledgement } from './lib/probes/after-ack.js'
import { closedInCohort } from './lib/probes/cohort.js'
import { revocationsWhileLoading } from './lib/probes/filter-load.js'
import { missedMessages } from './lib/probes/missed-messages.js'
import { revokedPastExp } from './lib/probes/past-exp.js'
import { receiptsHold } from './lib/probes/receipts.js'
import type { Kind, Log, ProbeResult } from './lib/probes/probe.js'
import { splitBrainWrites } from './lib/probes/split-brain.js'
import { unpublishedCommit } from './lib/probes/unpublished-commit.js'
import { webhookRetries } from './lib/probes/webhooks.js'
import { chaosServices, setUp, setUpSentinel, tearDown, type Clocks, type Scenario } from './lib/scenario.js'

/**
 * `npm run test:chaos`: the checker bites. Once per mutant (lib/mutants.mjs), each with one
 * defence taken out of the nodes' injected parts, the probe aimed at that defence
 * (lib/probes/, the reasoning at the head of each) must find violations of the kind the
 * defence prevents — every time, not when faults happen to line up — or the safe runs'
 * zeros (chaos.test.ts, which runs every probe too) prove nothing. Each run also checks that
 * its mutant acted on the nodes.
 *
 * The noisy neighbour's mutant (`acks-wait-for-replays`) is run by noisy-neighbour.test.ts.
 */
const services = chaosServices(t)

/**
 * The mutants that acknowledge a change before one step of it ran make that step take 0.4
 * lease (lib/mutants.mjs): a lease of 4 s makes that 1.6 s, far longer than the questions a
 * probe asks right after a 200 take on a busy machine, and still within the half lease a
 * correct node may take to acknowledge. The receipt mutant that answers before the acks
 * needs it too: a node cut off from Redis trusts its cache for about 3 s of it (the last pong,
 * a quarter lease before the cut, plus a lease), so it still accepts the old token when asked.
 */
const LONG_LEASE_MS = 4000
/**
 * The retention mutant is seen by the node whose clock lags, asked between the token's exp
 * and its own clock's: node-1 8 s behind (within MAX_CLOCK_SKEW) makes that 8 s instead of
 * the plain shape's 1.5 s, whatever a revoke and a verification take on a busy machine.
 */
const WIDE_CLOCKS: Clocks = { maxSkew: '10s', offsets: [undefined, '-8s', '+8s'] }

const PLAIN: Array<{ mutant: Mutant; what: string; probe: (s: Scenario, log: Log) => Promise<ProbeResult>; kinds: Kind[]; leaseMs?: number; clocks?: Clocks }> = [
  { mutant: 'no-epoch-flush', what: 'with no cache flush and no catch-up on reconnect', probe: missedMessages, kinds: ['version', 'jti'] },
  { mutant: 'catch-up-skips-window', what: 'with a catch-up that skips what was committed while the channel was lost', probe: missedMessages, kinds: ['version', 'jti'] },
  { mutant: 'catch-up-ignores-revoked-tokens', what: 'with a catch-up that leaves out the tokens revoked while the channel was lost', probe: missedMessages, kinds: ['jti'] },
  { mutant: 'subscribed-reads-skip', what: 'with reads of the change log while subscribed that drop what they read', probe: unpublishedCommit, kinds: ['version', 'jti'] },
  { mutant: 'rebuild-misses-arrivals', what: 'with a revocation filter that misses what arrives while it loads', probe: revocationsWhileLoading, kinds: ['jti'] },
  { mutant: 'retention-ignores-skew', what: 'with revocations kept until exp + JWT_CLOCK_TOLERANCE only (MAX_CLOCK_SKEW left out)', probe: revokedPastExp, kinds: ['jti'], clocks: WIDE_CLOCKS },
  { mutant: 'acks-before-sessions', what: 'with nodes that acknowledge a change before aborting the sessions it ends', probe: afterAcknowledgement, kinds: ['session'], leaseMs: LONG_LEASE_MS },
  { mutant: 'cohort-unlink-loses-the-rest', what: "with a session closed by its chat server taking its cohort's later sessions out of the index", probe: closedInCohort, kinds: ['session'] },
  { mutant: 'acks-before-stream-writes', what: 'with nodes that acknowledge a change before writing its events to their streams', probe: afterAcknowledgement, kinds: ['stream'], leaseMs: LONG_LEASE_MS },
  { mutant: 'webhook-failures-recorded-delivered', what: 'with webhook attempts that failed recorded as delivered', probe: webhookRetries, kinds: ['webhook'] },
  { mutant: 'caches-after-acknowledgement', what: "with the change pipeline reordered: a node's caches updated after it acknowledged", probe: afterAcknowledgement, kinds: ['version', 'jti'], leaseMs: LONG_LEASE_MS },
  { mutant: 'receipt-claims-every-node', what: 'with receipts that list every node as acknowledged before it did', probe: receiptsHold, kinds: ['receipt'], leaseMs: LONG_LEASE_MS },
  { mutant: 'receipt-leaves-out-unacknowledged', what: 'with receipts that leave out the nodes that did not acknowledge', probe: receiptsHold, kinds: ['receipt'] },
]

const found = (result: ProbeResult, kinds: Kind[]) => kinds.reduce((sum, kind) => sum + result.byKind[kind], 0)

for (const { mutant, what, probe, kinds, leaseMs, clocks } of PLAIN) {
  t.test(`the checker bites: ${what}, violations appear`, async (t) => {
    const s = await setUp(services, await services.createDatabase('chaos_mutant'), mutant, { ...(leaseMs === undefined ? {} : { leaseMs }), ...(clocks === undefined ? {} : { clocks }) })
    t.teardown(() => tearDown(s))
    const result = await probe(s, (line) => t.comment(line))
    t.ok(result.checked > 0, `the probe ${result.name} checked something (${result.checked})`)
    t.ok((await mutantCalls(s.nodes, (line) => t.comment(line))) > 0, `the mutant (test/chaos/lib/mutants.mjs ${mutant}) reached the nodes' parts`)
    t.ok(found(result, kinds) > 0, `the probe ${result.name} finds ${kinds.join(' or ')} violations (${found(result, kinds)})`)
  })
}

t.test('the checker bites on Sentinel: with the primary not checked with the sentinels, violations appear', async (t) => {
  const set = await startSentinelSet()
  t.teardown(() => set.stop())
  const s = await setUpSentinel(set, services.postgres, await services.createDatabase('chaos_sentinel_mutant'), 'no-primary-check')
  t.teardown(() => Promise.allSettled(s.nodes.map((n) => n.stop())))
  t.ok((await mutantCalls(s.nodes, (line) => t.comment(line))) > 0, 'the mutant (test/chaos/lib/mutants.mjs no-primary-check) reached the Redis bus')
  const result = await splitBrainWrites(s, (line) => t.comment(line))
  t.ok(result.checked > 0, `the probe ${result.name} checked something (${result.checked})`)
  t.ok(result.violations > 0, `with the primary unchecked the probe finds violations (${result.violations})`)
})
