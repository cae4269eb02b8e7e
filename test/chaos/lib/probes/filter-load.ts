import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { waitFor } from '../../../support/poll.js'
import { claimsOf, metric, ready, verifyStatus } from '../http.js'
import type { Scenario } from '../scenario.js'
import { company, forge, revokeToken, tally, users, type Log, type ProbeResult } from './probe.js'

/**
 * Revocations that arrive while a filter of revoked jtis loads (mutant
 * `rebuild-misses-arrivals`): cache/revoked-tokens.ts gives each one to the filter that
 * answers and to the one being loaded, which replaces it.
 *
 * The company first holds BULK live revocations, written straight into revoked_token (their
 * jtis start with "b"; the table's triggers count them, migration 008). Then a load starts on
 * purpose on every node: a change message none can authenticate is published on the changes
 * channel, and each node, which must not trust what such a message may have made stale,
 * starts a new epoch — a flush, and a load of every live revocation (a load is seen under
 * way while chat_auth_revocation_filter_bytes holds two filters; it is done when
 * chat_auth_revocation_loads_total{result="done"} moves). While the loads run, tokens are
 * revoked through the nodes; their jtis, chosen by forging the tokens, sort below every jti
 * in the table ("0000…", each lower than the one before). Once a node's load is done, every
 * one of those tokens is presented to it.
 *
 * Why the mutant is caught every time: a load walks the table in jti order, page after page,
 * so once its first page is read, a jti sorting below everything is never read by it. The
 * revocations committed while it runs reach the load only as the bus's arrivals, which the
 * mutant's filter being loaded drops (its pages are one jti each, so that a load of BULK
 * rows lasts seconds and the revocations are sure to land inside it). When the load is done
 * its filter answers "not revoked" for them without reading the store: accepted on every node
 * whose load was under way. A node that gives arrivals to both filters refuses them all.
 */
const BULK = 2000
const REVOKED = 6
/** REVOCATION_FILTER_BYTES: the nodes' default; more than this held while a fresh filter loads beside it */
const FILTER_BYTES = 16_777_216
const LOADS = 'chat_auth_revocation_loads_total'
const BYTES = 'chat_auth_revocation_filter_bytes'
/** each probe's jtis below the last one's: "0000" and a number counting down */
let nextLow = 9_999_999

export async function revocationsWhileLoading(s: Scenario, log: Log): Promise<ProbeResult> {
  const p = tally('revocations-while-loading', log)
  const { companyId, creds } = await company(s, 'Filter Load Co')
  const [holder] = await users(s, creds, 'filter-holder', 1)
  const claims = claimsOf(holder!.token)
  const exp = Math.floor(Date.now() / 1000) + 3600
  const tokens = Array.from({ length: REVOKED }, () => forge(claims, `0000${String(nextLow--).padStart(7, '0')}`, exp))

  const db = new pg.Client({ connectionString: s.databaseUrl })
  await db.connect()
  try {
    await db.query(`INSERT INTO revoked_token (jti, company_id, expires_at) SELECT 'b' || lpad(n::text, 7, '0') || $3::text, $1, now() + interval '1 hour' FROM generate_series(1, $2::int) n`, [companyId, BULK, `-${nextLow}`])
  } finally {
    await db.end()
  }
  await Promise.all(s.nodes.map((node) => waitFor(`${node.name} to vouch for its cache`, () => ready(node.url), { timeoutMs: 30_000, everyMs: 20 })))
  const state = async (url: string) => ({ loads: (await metric(url, LOADS, 'result="done"')) ?? -1, bytes: (await metric(url, BYTES)) ?? 0 })
  const before = await Promise.all(s.nodes.map((node) => state(node.url)))

  const epoch = performance.now()
  await (await s.redis.admin()).publish('chat-auth:changes', 'not a change message: every node starts a new epoch')
  const loading = (i: number, x: { loads: number; bytes: number }) => x.loads === before[i]!.loads && x.bytes > FILTER_BYTES
  const started = await Promise.all(
    s.nodes.map((node, i) =>
      waitFor(`${node.name} to start loading its filter`, () => state(node.url), { until: (x) => x.loads > before[i]!.loads || loading(i, x), timeoutMs: 15_000, everyMs: 10 }).then((x) => loading(i, x)),
    ),
  )
  const answers = await Promise.all(tokens.map((token, k) => revokeToken(s.nodes[k % s.nodes.length]!.url, creds, token)))
  const still = await Promise.all(s.nodes.map(async (node, i) => loading(i, await state(node.url))))
  log(
    `  revocations-while-loading: ${answers.filter((a) => a.status === 200).length} of ${REVOKED} revocations answered 200; ` +
      `a load under way before them and after them: ${s.nodes.map((_, i) => `node-${i} ${started[i] ? 'yes' : 'no'}/${still[i] ? 'yes' : 'no'}`).join(', ')}`,
  )

  // Each node as soon as its load is done: a load started afterwards would read them all.
  const loadedIn: number[] = []
  await Promise.all(
    s.nodes.map(async (node, i) => {
      const done = await waitFor(`${node.name} to finish loading its filter`, () => state(node.url), { until: (x) => x.loads > before[i]!.loads, timeoutMs: 120_000, everyMs: 10 })
      loadedIn[i] = performance.now() - epoch
      const statuses = await Promise.all(tokens.map((token, k) => (answers[k]!.status === 200 ? verifyStatus(node.port, token) : Promise.resolve(0))))
      for (const [k, status] of statuses.entries()) {
        if (status === 0) continue
        p.checked()
        if (status === 200) p.violation('jti', `node-${i} accepted a token revoked while its filter loaded (revocation ${k + 1} of ${REVOKED}; ${done.loads - before[i]!.loads} load(s) done since the epoch)`)
      }
    }),
  )
  log(`  revocations-while-loading: each node's load done (seen) after the epoch: ${loadedIn.map((ms, i) => `node-${i} ${(ms / 1000).toFixed(2)} s`).join(', ')}`)
  return p.result()
}
