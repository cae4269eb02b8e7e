import type { Records, Verification } from './records.js'
import { SESSION_BOUND_MS } from './watch.js'

/**
 * The checker of the general load (driver.ts), on the driver's clock. An accepted
 * verification that started after one of these answered 200 is a violation:
 * - a token version lower than a version whose invalidation had answered;
 * - a token whose revoke-token had answered;
 * - a token of the second company whose issuing answered before a company revoke-tokens
 *   began, and that revoke had answered;
 * and so is:
 * - a session still open when asked right after the invalidation, revoke-token or company
 *   revoke-tokens that ends it answered 200 — or, if a fault was near (the node may not
 *   have acknowledged), still open a lease + 1 s later, the documented bound (docs/live-revocation.md);
 * - an event of such an invalidation or revoke-token not yet written to a node's event
 *   stream when asked right after the 200 — or, if a fault was near, never written within
 *   STREAM_LATE_LIMIT_MS;
 * - an event of the first company never accepted by its webhook receiver within the drain
 *   time after the load stops: at least once, whatever the faults.
 */
export interface ByKind {
  version: number
  jti: number
  company: number
  session: number
  stream: number
  webhook: number
  /** a receipt that names a node as acknowledged that had not applied the change, or leaves a live node out (probes/receipts.ts) */
  receipt: number
}

export interface Result {
  verifications: number
  accepted: number
  invalidations: number
  invalidationsOk: number
  tokenRevocationsOk: number
  /** revoke-token of the tokens that expire during the run, answered 200 */
  expiringRevocationsOk: number
  companyRevocationsOk: number
  faults: number
  violations: number
  byKind: ByKind
  /** sessions held on the nodes: opened, ended by a change that answered 200, checked right after it, violations (open at the answer with no fault near, or after the bound) */
  sessions: { opened: number; refused: number; ended: number; checked: number; openNearFault: number; strictViolations: number; boundViolations: number; unchecked: number }
  /** events of invalidations and revoke-tokens that answered 200, checked on every node's stream: violations (not written at the answer with no fault near, or never) */
  stream: { checked: number; late: number; strictViolations: number; lostViolations: number; unchecked: number }
  /** the first company's events and its webhook receiver: accepted at least once, attempts, refused on purpose, never accepted (violations) */
  webhooks: { events: number; accepted: number; attempts: number; failedOnPurpose: number; duplicates: number; missing: number }
  rate503During: number
  rate503After: number
  examples: string[]
}

/** median and max, in ms */
const quantiles = (values: number[]) => {
  if (!values.length) return '-'
  const sorted = [...values].sort((a, b) => a - b)
  return `median ${sorted[sorted.length >> 1]!.toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms`
}

/** For each user, the highest version whose invalidation had answered before a time. */
function versionFloors(r: Records): (user: number, at: number) => number {
  const byUser = new Map<number, Array<{ end: number; max: number }>>()
  for (const inv of [...r.invalidations].sort((a, b) => a.end - b.end)) {
    const list = byUser.get(inv.user) ?? []
    list.push({ end: inv.end, max: Math.max(inv.version, list.at(-1)?.max ?? 0) })
    byUser.set(inv.user, list)
  }
  return (user, at) => {
    const list = byUser.get(user)
    if (!list) return 0
    let lo = 0
    let hi = list.length // first index with end >= at
    while (lo < hi) {
      const mid = (lo + hi) >> 1
      if (list[mid]!.end < at) lo = mid + 1
      else hi = mid
    }
    return lo === 0 ? 0 : list[lo - 1]!.max
  }
}

export function check(r: Records, log: (line: string) => void): Result {
  const { loadStarted, windows } = r
  const revokedBelow = versionFloors(r)
  const nearFault = (time: number) => {
    const fault = windows.find((w) => time >= w.start - 500 && time <= w.end + 1500)
    return fault ? ` (near fault: ${fault.name})` : ''
  }
  const at = (time: number) => `${((time - loadStarted) / 1000).toFixed(3)} s`
  let violations = r.webhooks.missing
  const byKind: ByKind = { version: 0, jti: 0, company: 0, session: 0, stream: 0, webhook: r.webhooks.missing, receipt: 0 }
  const examples: string[] = []
  for (const id of r.webhooks.missingIds.slice(0, 3)) examples.push(`event ${id} of the first company never reached its webhook receiver within ${r.webhookDrainMs} ms of the load's end`)
  // The company revokes that had answered before `start`, by answer time: the latest one
  // that began after the token's issuing answered refuses it.
  const companyRevokedAfter = (issuedEnd: number, start: number) => r.companyRevocations.find((c) => c.start > issuedEnd && c.end < start)
  // Versions only grow: two acknowledged invalidations answering the same version mean the
  // store lost a write it had acknowledged — a test-setup problem, not a cache one, told apart.
  const seen = new Set<string>()
  let lostWrites = 0
  for (const inv of r.invalidations) {
    const id = `${inv.user}:${inv.version}`
    if (seen.has(id)) lostWrites++
    seen.add(id)
  }
  if (lostWrites) log(`WARNING: ${lostWrites} acknowledged invalidations answered a version already answered: the store lost writes`)
  for (const v of r.verifications) {
    if (v.status === 200 && v.revokedEnd !== undefined && v.start > v.revokedEnd) {
      violations++
      byKind.jti++
      if (examples.length < 10) examples.push(`node-${v.node} accepted a token revoked alone (revoke-token answered at ${at(v.revokedEnd)}) at ${at(v.start)}${nearFault(v.start)}`)
      continue
    }
    if (v.issuedEnd !== undefined) {
      const revoke = v.status === 200 ? companyRevokedAfter(v.issuedEnd, v.start) : undefined
      if (revoke !== undefined) {
        violations++
        byKind.company++
        if (examples.length < 10) examples.push(`node-${v.node} accepted a token of the second company issued by ${at(v.issuedEnd)} at ${at(v.start)}; its revoke-tokens answered at ${at(revoke.end)}${nearFault(v.start)}`)
      }
      continue
    }
    if (v.status === -1) {
      violations++
      examples.push(`node-${v.node} answered 200 with another token version than user-${v.user} v${v.version}`)
      continue
    }
    if (v.status !== 200) continue
    const floor = revokedBelow(v.user, v.start)
    if (v.version < floor) {
      violations++
      byKind.version++
      if (examples.length < 10) {
        const acked = r.invalidations.find((inv) => inv.user === v.user && inv.version === floor)!
        examples.push(`node-${v.node} accepted user-${v.user} v${v.version} at ${at(v.start)}; v${floor} was acknowledged at ${at(acked.end)}${nearFault(v.start)}`)
      }
    }
  }
  // Sessions: one still open when asked right after the 200 that ended it is a violation,
  // unless a fault was near (its node may not have acknowledged: the writer answered without
  // it); then only if still open once the documented bound (docs/live-revocation.md) passed.
  const sessions = { opened: r.sessions.opened, refused: r.sessions.refused, ended: r.sessions.findings.length, checked: 0, openNearFault: 0, strictViolations: 0, boundViolations: 0, unchecked: 0 }
  for (const f of r.sessions.findings) {
    if (f.openAtAnswer !== undefined) sessions.checked++
    const near = nearFault(f.end)
    let violation: string | undefined
    if (f.openAtAnswer === true && !near) {
      sessions.strictViolations++
      violation = `a session on node-${f.node} was still open right after the ${f.what} answered 200 at ${at(f.end)}`
    } else if (f.openAfterBound === true) {
      sessions.boundViolations++
      violation = `a session on node-${f.node} was still open ${SESSION_BOUND_MS} ms after the ${f.what} answered 200 at ${at(f.end)}${near}`
    } else if (f.openAtAnswer === true) sessions.openNearFault++
    if (f.openAtAnswer !== false && f.openAfterBound === undefined && violation === undefined) sessions.unchecked++
    if (violation === undefined) continue
    violations++
    byKind.session++
    if (examples.length < 10) examples.push(violation)
  }
  // Event streams: an event not yet written when asked right after the 200 is a violation,
  // unless a fault was near (its node may not have acknowledged); then only if never written.
  const stream = { checked: 0, late: 0, strictViolations: 0, lostViolations: 0, unchecked: r.streams.unchecked }
  const lateBy: number[] = []
  for (const f of r.streams.findings) {
    if (f.writtenAtAnswer === undefined || f.reconnected) {
      stream.unchecked++
      continue
    }
    stream.checked++
    if (f.writtenAtAnswer) continue
    const near = nearFault(f.end)
    let violation: string | undefined
    if (!near) {
      stream.strictViolations++
      violation = `node-${f.node} had not written the event of the ${f.what} to its stream when asked ${f.askedIn.toFixed(0)} ms after it answered 200 at ${at(f.end)}`
    } else if (f.writtenLate === undefined) {
      stream.lostViolations++
      violation = `node-${f.node} never wrote the event of the ${f.what} (answered 200 at ${at(f.end)}${near}) to its stream`
    } else {
      stream.late++
      lateBy.push(f.writtenLate)
    }
    if (violation === undefined) continue
    violations++
    byKind.stream++
    if (examples.length < 10) examples.push(violation)
  }
  const inWindow = (v: Verification) => windows.some((w) => v.start >= w.start && v.start <= w.end)
  const rate503 = (list: Verification[]) => (list.length ? list.filter((v) => v.status === 503).length / list.length : 0)
  const during = r.verifications.filter(inWindow)
  const after = r.verifications.filter((v) => !inWindow(v))
  const accepted = r.verifications.filter((v) => v.status === 200).length
  log(
    `operations: ${r.verifications.length} verifications (${(r.verifications.length / r.loadSeconds).toFixed(0)}/s, ${accepted} accepted, ${r.skipped} skipped at the in-flight cap), ` +
      `${r.invalidationsTried} invalidations (${r.invalidations.length} answered 200, ${(r.invalidationsTried / r.loadSeconds).toFixed(1)}/s) in ${r.loadSeconds.toFixed(1)} s`,
  )
  log(
    `revocations: ${r.tokenRevocationsTried} revoke-token (${r.tokenRevocationsOk} answered 200), ${r.expiringRevocationsTried} of tokens near their exp (${r.expiringRevocationsOk} answered 200), ${r.companyRevocationsTried} company revoke-tokens (${r.companyRevocations.length} answered 200); ` +
      `presented: ${r.verifications.filter((v) => v.revokedEnd !== undefined).length} revoked tokens, ${r.verifications.filter((v) => v.issuedEnd !== undefined).length} tokens of the second company`,
  )
  log(`faults injected: ${windows.length}`)
  logAroundFaults(r, log)
  log(`503 rate: ${(rate503(during) * 100).toFixed(2)}% during faults (${during.length} verifications), ${(rate503(after) * 100).toFixed(2)}% outside them (${after.length})`)
  log(
    `sessions: ${sessions.opened} opened (${sessions.refused} refused), ${sessions.ended} ended by a change that answered 200, ${sessions.checked} checked right after it; ` +
      `refused: ${[...r.sessions.refusedCodes].map(([code, n]) => `${code} ${n}`).join(', ') || 'none'}; answers to the check came ${quantiles(r.sessions.findings.map((f) => f.askedIn))} after the 200; ` +
      `open then near a fault ${sessions.openNearFault}, violations: ${sessions.strictViolations} open at the answer with no fault near, ${sessions.boundViolations} open after the bound (${SESSION_BOUND_MS} ms); ${sessions.unchecked} could not be asked`,
  )
  log(
    `event streams: ${stream.checked} events checked on a node's stream right after their 200 (${stream.unchecked} could not be: stream not connected since before the write, or no answer); ` +
      `written later near a fault ${stream.late} (${quantiles(lateBy)} after the 200); violations: ${stream.strictViolations} not written at the answer with no fault near, ${stream.lostViolations} never written`,
  )
  for (const example of examples) log(`  violation: ${example}`)
  log(`violations: ${violations} (older version ${byKind.version}, revoked jti ${byKind.jti}, company revoke ${byKind.company}, open session ${byKind.session}, event stream ${byKind.stream}, webhook ${byKind.webhook})`)
  const { events, failedOnPurpose, duplicates, missing, attempts } = r.webhooks
  return {
    verifications: r.verifications.length,
    accepted,
    invalidations: r.invalidationsTried,
    invalidationsOk: r.invalidations.length,
    tokenRevocationsOk: r.tokenRevocationsOk,
    expiringRevocationsOk: r.expiringRevocationsOk,
    companyRevocationsOk: r.companyRevocations.length,
    byKind,
    sessions,
    stream,
    webhooks: { events, accepted: r.webhooks.accepted, attempts, failedOnPurpose, duplicates, missing },
    faults: windows.length,
    violations,
    rate503During: rate503(during),
    rate503After: rate503(after),
    examples,
  }
}

/**
 * Around each fault (from its start to 1.5 s after every node was ready again): writes that
 * answered 503 and the span from the first to the last; per node, the time it could not
 * vouch for its cache (so verifications read PostgreSQL), from the samples. Reported, not checked.
 */
function logAroundFaults(r: Records, log: (line: string) => void): void {
  for (const w of r.windows) {
    const near = (at: number) => at >= w.start && at <= w.end + 1500
    const failed = r.writes.filter((x) => near(x.start) && x.status === 503)
    const span = failed.length ? `${((Math.max(...failed.map((x) => x.end)) - Math.min(...failed.map((x) => x.start))) / 1000).toFixed(2)} s` : '0 s'
    const ok = r.writes.filter((x) => near(x.start) && x.status === 200).length
    let line = `  ${w.name}: writes ${failed.length}×503 over ${span} (${ok}×200)`
    if (r.notReady) {
      const perNode = r.notReady.map((samples, i) => {
        const inWindow = samples.filter((x) => near(x.at))
        let unready = 0
        for (let k = 0; k + 1 < inWindow.length; k++) if (!inWindow[k]!.ready) unready += inWindow[k + 1]!.at - inWindow[k]!.at
        return `node-${i} ${(unready / 1000).toFixed(2)} s`
      })
      line += `; reading PostgreSQL (not ready): ${perNode.join(', ')}`
    }
    log(line)
  }
}
