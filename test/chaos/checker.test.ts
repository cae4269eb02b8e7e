import t from 'tap'
import { check } from './lib/checks.js'
import type { Records } from './lib/records.js'

/**
 * `npm run test:chaos`: the general load's checker (lib/checks.ts) bites. The mutants are
 * caught by probes aimed at them (mutants.test.ts); this shows, on records made by hand,
 * that each kind of violation the safe runs' zeros speak of is counted when it is there,
 * and that what the checker allows (near a fault, within the bounds) is not counted.
 */
const empty = (): Records => ({
  loadStarted: 0,
  loadSeconds: 10,
  verifications: [],
  skipped: 0,
  invalidations: [],
  invalidationsTried: 0,
  companyRevocations: [],
  companyRevocationsTried: 0,
  tokenRevocationsTried: 0,
  tokenRevocationsOk: 0,
  expiringRevocationsTried: 0,
  expiringRevocationsOk: 0,
  windows: [{ name: 'a fault', start: 5000, end: 6000 }],
  writes: [],
  notReady: undefined,
  sessions: { opened: 0, refused: 0, refusedCodes: new Map(), findings: [] },
  streams: { findings: [], unchecked: 0 },
  webhooks: { events: 3, accepted: 3, attempts: 4, failedOnPurpose: 1, duplicates: 0, missing: 0, missingIds: [] },
  webhookDrainMs: 45_000,
})

const quiet = () => {}

t.test('records with nothing wrong in them: no violation', async (t) => {
  const r = empty()
  r.invalidations.push({ user: 1, version: 1, end: 1000 })
  r.companyRevocations.push({ start: 1500, end: 1600 })
  r.verifications.push(
    { user: 1, version: 0, node: 0, start: 900, status: 200 }, // before the invalidation answered
    { user: 1, version: 0, node: 1, start: 1100, status: 401 },
    { user: 1, version: 1, node: 2, start: 1100, status: 200 },
    { user: 2, version: 0, node: 0, start: 1100, status: 200, revokedEnd: 1200 }, // before the revocation answered
    { user: -1, version: 0, node: 0, start: 1700, status: 200, issuedEnd: 1650 }, // issued after the company's revocation
  )
  r.sessions.findings.push({ node: 0, what: 'x', end: 5500, openAtAnswer: true, askedIn: 5, openAfterBound: false }) // near a fault, closed within the bound
  r.streams.findings.push({ node: 0, what: 'y', end: 5500, writtenAtAnswer: false, askedIn: 5, writtenLate: 300 }) // near a fault, written later
  const result = check(r, quiet)
  t.equal(result.violations, 0)
  t.same(result.byKind, { version: 0, jti: 0, company: 0, session: 0, stream: 0, webhook: 0, receipt: 0 })
  t.equal(result.sessions.openNearFault, 1)
  t.equal(result.stream.late, 1)
})

t.test('each kind of violation is counted', async (t) => {
  const r = empty()
  r.invalidations.push({ user: 1, version: 1, end: 1000 }, { user: 1, version: 3, end: 2000 })
  r.companyRevocations.push({ start: 1500, end: 1600 })
  r.verifications.push(
    { user: 1, version: 0, node: 0, start: 1100, status: 200 }, // v1 answered before
    { user: 1, version: 2, node: 1, start: 2100, status: 200 }, // v3 answered before
    { user: 1, version: 2, node: 1, start: 2100, status: -1 }, // 200 naming another version
    { user: 2, version: 0, node: 2, start: 1300, status: 200, revokedEnd: 1200 },
    { user: -1, version: 0, node: 0, start: 1700, status: 200, issuedEnd: 1400 },
  )
  r.sessions.findings.push(
    { node: 0, what: 'a', end: 1000, openAtAnswer: true, askedIn: 5 }, // no fault near: strict
    { node: 1, what: 'b', end: 5500, openAtAnswer: true, askedIn: 5, openAfterBound: true }, // near a fault, past the bound
  )
  r.streams.findings.push(
    { node: 0, what: 'c', end: 1000, writtenAtAnswer: false, askedIn: 5 }, // no fault near: strict
    { node: 1, what: 'd', end: 5500, writtenAtAnswer: false, askedIn: 5 }, // near a fault, never written
  )
  r.webhooks = { ...r.webhooks, accepted: 1, missing: 2, missingIds: ['7', '8'] }
  const result = check(r, quiet)
  t.same(result.byKind, { version: 2, jti: 1, company: 1, session: 2, stream: 2, webhook: 2, receipt: 0 })
  t.equal(result.violations, 11, 'and the answer naming another version')
  t.same([result.sessions.strictViolations, result.sessions.boundViolations], [1, 1])
  t.same([result.stream.strictViolations, result.stream.lostViolations], [1, 1])
})
