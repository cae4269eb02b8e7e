import { createPostgresDb } from '../../../../src/store/db.js'
import { createStore } from '../../../../src/store/store.js'
import { waitFor } from '../../../support/poll.js'
import { claimsOf, metric, ready, verifyStatus } from '../http.js'
import type { Shape } from '../scenario.js'
import { company, tally, users, warm, type Log, type ProbeResult } from './probe.js'

/**
 * An unpublished commit: a change committed whose publish never happened (its writer died
 * between commit and publish, or its publish failed and the write answered 503) reaches a
 * subscribed node only through its periodic reads of the change log (mutant
 * `subscribed-reads-skip`).
 *
 * Every node caches users and is left trusting (no fault: each vouches for its cache
 * throughout). Then users are invalidated and tokens revoked by the store's publishing writes
 * called directly on the chaos database (src/store, as a writer that died right after its
 * commit would leave them): nothing is published. The probe waits until every node has
 * finished two reads of the change log while subscribed (chat_auth_bus_periodic_catch_ups_total,
 * counted from after the commits, not a time), then presents the old tokens and
 * the revoked ones to every node.
 *
 * Why the mutant is caught every time: its reads made while the node trusts its cache drop
 * what they read and move the cursor past it, and here every node trusts at every read, so
 * no node ever applies these changes: each cached user stays at its old version and each
 * revoked jti stays unknown, on every node, until a flush that never comes. A node whose
 * periodic read delivers what it read refuses them all.
 */
const INVALIDATED = 3
const REVOKED = 3
/** MAX_LIVE_TOKEN_REVOCATIONS and the grace (JWT_CLOCK_TOLERANCE + MAX_CLOCK_SKEW) the nodes write with */
const LIMITS = { maxLive: 100_000, graceSeconds: 2 }
const PERIODIC = 'chat_auth_bus_periodic_catch_ups_total'

export async function unpublishedCommit(s: Shape, log: Log): Promise<ProbeResult> {
  const p = tally('unpublished-commit', log)
  const { companyId, creds } = await company(s, 'Unpublished Co')
  const invalidated = await users(s, creds, 'unpublished-user', INVALIDATED)
  const revoked = await users(s, creds, 'unpublished-holder', REVOKED)
  await warm(s, [...invalidated, ...revoked].map((u) => u.token))

  // The dead writer: its own connection, the commits, and nothing else.
  const db = createPostgresDb(s.databaseUrl, { max: 1 })
  try {
    const store = createStore(db)
    for (const u of invalidated) if ((await store.incrementTokenVersion(companyId, u.userId)) === undefined) throw new Error('the user to invalidate was not found')
    for (const u of revoked) {
      const { jti, exp, sub } = claimsOf(u.token)
      const written = await store.revokeToken(companyId, jti, exp, sub, LIMITS)
      if (typeof written !== 'object') throw new Error(`the revocation was not written: ${written}`)
    }
  } finally {
    await db.close()
  }
  // Counted from after the commits: the first read counted may have begun before them, the second began after it ended.
  const after = await Promise.all(s.nodes.map((node) => metric(node.url, PERIODIC, 'outcome="complete"')))
  await Promise.all(
    s.nodes.map((node, i) =>
      waitFor(`${node.name} to finish two reads of the change log while subscribed`, () => metric(node.url, PERIODIC, 'outcome="complete"'), { until: (n) => n !== undefined && n >= (after[i] ?? 0) + 2, timeoutMs: 60_000, everyMs: 20 }),
    ),
  )
  const trusted = await Promise.all(s.nodes.map((node) => ready(node.url)))
  log(`  unpublished-commit: nodes vouching for their caches after the reads: ${trusted.map((ok, i) => `node-${i} ${ok ? 'yes' : 'no'}`).join(', ')}`)

  const presented = [
    ...invalidated.map((u, i) => ({ kind: 'version' as const, token: u.token, what: `the token of unpublished-user-${i} from before its unpublished invalidation` })),
    ...revoked.map((u, i) => ({ kind: 'jti' as const, token: u.token, what: `the token of unpublished-holder-${i}, revoked without a publish` })),
  ]
  for (const one of presented) {
    const statuses = await Promise.all(s.nodes.map((node) => verifyStatus(node.port, one.token)))
    for (const [i, status] of statuses.entries()) {
      if (status === 0) continue
      p.checked()
      if (status === 200) p.violation(one.kind, `node-${i} accepted ${one.what}, two reads of the change log later`)
    }
  }
  return p.result()
}
