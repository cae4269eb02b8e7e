import type { SessionFinding, StreamFinding } from './watch.js'
import type { WebhookCounts } from './webhook-receiver.js'

/**
 * What the driver (driver.ts) records of a run, on its own clock (performance.now()), and
 * the checker (checks.ts) turns into violations.
 */
export interface Verification {
  user: number
  version: number
  node: number
  start: number
  /** the answer's status; 0: timed out or refused; -1: 200 with another token version than presented */
  status: number
  /** what else the token is: one revoked alone (answered at `revokedEnd`), or one of the second company issued by `issuedEnd` */
  revokedEnd?: number
  issuedEnd?: number
}

export interface Invalidation {
  user: number
  version: number
  end: number
}

export interface CompanyRevocation {
  start: number
  end: number
}

/** A fault's span: from its start until every node was ready again. */
export interface Window {
  name: string
  start: number
  end: number
}

export interface Records {
  loadStarted: number
  loadSeconds: number
  verifications: Verification[]
  /** verifications not sent: too many in flight */
  skipped: number
  invalidations: Invalidation[]
  invalidationsTried: number
  companyRevocations: CompanyRevocation[]
  companyRevocationsTried: number
  tokenRevocationsTried: number
  tokenRevocationsOk: number
  expiringRevocationsTried: number
  expiringRevocationsOk: number
  windows: Window[]
  /** every write's answer (invalidations), for the 503s around each fault */
  writes: Array<{ start: number; end: number; status: number }>
  /** with sampleReadiness: each node's /readyz every 25 ms */
  notReady: Array<Array<{ at: number; ready: boolean }>> | undefined
  sessions: { opened: number; refused: number; refusedCodes: Map<string, number>; findings: SessionFinding[] }
  streams: { findings: StreamFinding[]; unchecked: number }
  webhooks: WebhookCounts
  /** how long the webhook receiver was given after the load stopped */
  webhookDrainMs: number
}
