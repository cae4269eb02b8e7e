import { performance } from 'node:perf_hooks'
import { ADMIN_TOKEN } from '../../support/constants.js'
import { forgeHs256, hs256Kid } from '../../support/helpers.js'
import { call, setupCompany } from '../../support/http-client.js'
import { sleep, waitFor } from '../../support/poll.js'
import type { Fault } from './faults.js'
import { claimsOf, get, jtiOf, oauthRevoke, REQUEST_TIMEOUT_MS, tokenVersion } from './http.js'
import type { CompanyRevocation, Invalidation, Records, Verification, Window } from './records.js'
import type { Shape } from './scenario.js'
import { holdSessions, watchStreams, type HeldSession } from './watch.js'
import { startChaosWebhookReceiver } from './webhook-receiver.js'

/**
 * The general load, under faults one after another (what it checks: checks.ts): ~20
 * invalidations/s, ~5 single-token revocations/s (half through `POST /oauth2/revoke`), ~5
 * more of tokens that expire during the run, each revoked within 2 s either side of its exp
 * and presented until it is expired for every node, a company-wide revocation every ~2.5 s
 * (of a second company) and ~500 verifications/s of current, stale and revoked tokens across
 * the nodes; sessions held on every node (a share of users' latest tokens, of tokens then
 * revoked alone and of the second company's), an event stream per node, and the first
 * company's webhook receiver (the first attempt of every fifth event refused).
 */
const USERS = 40
const INVALIDATIONS_PER_S = 20
const TOKEN_REVOCATIONS_PER_S = 5
const COMPANY_REVOCATIONS_PER_S = 0.4
const COMPANY_USERS = 10
/** share of verifications that present a revoked token, and a token of the second company */
const REVOKED_SHARE = 0.15
const COMPANY_SHARE = 0.15
/** revoked tokens the driver keeps presenting (the latest ones) */
const REVOKED_KEPT = 200
const VERIFICATIONS_PER_S = 500
const MAX_IN_FLIGHT = 256
/** Tokens that expire during the run, revoked around their exp: how many a second, their life, how near exp, and how often they are presented after. */
const EXPIRING_PER_S = 5
const EXPIRING_LIFE_S = 3
const REVOKE_AROUND_EXP_MS = 2000
/** presented until this long after exp: past it the clock furthest behind (1.5 s) refuses the token as expired */
const PRESENT_PAST_EXP_MS = 2500
const PRESENT_EVERY_MS = 150
const CLOCK_USERS = 10
/** Share of new latest tokens (after an invalidation) and of tokens revoked alone held open as a session on every node. */
const SESSION_SHARE = 0.3
/**
 * The second company's members whose tokens are held open as a session on every node (3 of
 * 10), and the one of them whose chat server closes its session right after it opened.
 * Fixed, not drawn: in the first batch (issued in order) the closed session is opened after
 * a kept one of the same cohort, so every run closes a session with another behind it in
 * its cohort's list, which the company's revocation must still find.
 */
const heldMember = (i: number) => i % 3 === 1
const closedMember = (i: number) => i === 4
/** Every event must have reached the webhook receiver this long after the load stopped (retries start at WEBHOOK_RETRY_BASE_MS). */
const WEBHOOK_DRAIN_MS = 45_000

const now = () => performance.now()
const pick = <T>(items: T[]) => items[Math.floor(Math.random() * items.length)]!

/** `sampleReadiness`: each node's /readyz every 25 ms (reported around each fault). */
export async function drive<S extends Shape>(s: S, faults: Array<Fault<S>>, log: (line: string) => void, options: { sampleReadiness?: boolean } = {}): Promise<Records> {
  const nodes = s.nodes.map((n) => n.url)
  const key = await setupCompany(nodes[0]!)
  const creds = { keyId: key.keyId, keySecret: key.keySecret }
  const webhook = await startChaosWebhookReceiver(nodes[0]!, key.companyId, 'first-of-every-fifth')

  // Every user, with a token of every version it has had (the driver keeps them all).
  const users: Array<{ id: string; tokens: Map<number, string>; latest: number }> = []
  for (let i = 0; i < USERS; i++) {
    const issued = await call(nodes[i % 3]!, 'POST', '/rest/v1/auth/token', { ...creds, userId: `user-${i}` })
    if (issued.status !== 200) throw new Error(`token: ${issued.status} ${JSON.stringify(issued.body)}`)
    users.push({ id: issued.body.user.id, tokens: new Map([[0, issued.body.token]]), latest: 0 })
  }
  // The second company, whose tokens are all revoked at once now and then: each user's
  // latest token, with the time its issuing answered.
  const second = await setupCompany(nodes[0]!, 'Revoked Co')
  const secondCreds = { keyId: second.keyId, keySecret: second.keySecret }
  const companyTokens: Array<{ token: string; issuedEnd: number }> = []
  // Sessions held open on the nodes (new ones until the load stops), and a stream per node.
  let holding = true
  const sessions = holdSessions(nodes)
  const userSessions = new Map<number, Array<HeldSession & { version: number }>>()
  const companySessions: Array<HeldSession & { issuedEnd: number }> = []
  const streams = await watchStreams(nodes, creds)

  const fetchCompanyToken = async (i: number) => {
    const answer = await call(pick(nodes), 'POST', '/rest/v1/auth/token', { ...secondCreds, userId: `member-${i}` }).catch(() => undefined)
    if (answer?.status !== 200) return
    const issuedEnd = now()
    companyTokens[i] = { token: answer.body.token, issuedEnd }
    if (!holding || !heldMember(i)) return
    const held = await sessions.openEverywhere(answer.body.token)
    // Some chat connections end by themselves (close()), most recent first, as a node's
    // newest session is the head of its cohort's list: the sessions left beside them must
    // still be found and ended by the company's revocation (src/sessions/cohort.ts).
    if (closedMember(i)) await sessions.closeEverywhere(held)
    else for (const session of held) companySessions.push({ ...session, issuedEnd })
  }
  for (let i = 0; i < COMPANY_USERS; i++) {
    await fetchCompanyToken(i)
    if (companyTokens[i] === undefined) throw new Error('could not issue a token of the second company')
  }
  const companyRevocations: CompanyRevocation[] = []
  // Tokens revoked one by one, with the time their revoke-token answered (the latest ones).
  const revokedTokens: Array<{ user: number; version: number; token: string; end: number }> = []

  // Tokens whose exp falls inside the run, forged with the nodes' key from the claims of a
  // token issued to a user no invalidation touches (so that only its revocation refuses it):
  // the API's shortest lifetime (1m) would take the whole run to expire.
  const clockUsers: Array<Record<string, unknown>> = []
  for (let i = 0; i < CLOCK_USERS; i++) {
    const issued = await call(nodes[i % 3]!, 'POST', '/rest/v1/auth/token', { ...creds, userId: `clock-${i}` })
    if (issued.status !== 200) throw new Error(`token: ${issued.status} ${JSON.stringify(issued.body)}`)
    clockUsers.push(claimsOf(issued.body.token))
  }

  const verifications: Verification[] = []
  const invalidations: Invalidation[] = []
  const windows: Window[] = []
  const counts = { invalidationsTried: 0, tokenRevocationsTried: 0, tokenRevocationsOk: 0, expiringRevocationsTried: 0, expiringRevocationsOk: 0, companyRevocationsTried: 0, skipped: 0 }
  const writes: Records['writes'] = []
  const notReady: Array<Array<{ at: number; ready: boolean }>> = nodes.map(() => [])
  let inFlight = 0
  let expiringInFlight = 0
  let running = true

  const fetchToken = async (user: number) => {
    const answer = await call(pick(nodes), 'POST', '/rest/v1/auth/token', { ...creds, userId: `user-${user}` }).catch(() => undefined)
    if (answer?.status !== 200) return
    const version = tokenVersion(answer.body.token)
    const u = users[user]!
    u.tokens.set(version, answer.body.token)
    u.latest = Math.max(u.latest, version)
  }

  /** One verification on a random node; `expected`: the version a 200 must name (anything else is nonsense, -1). */
  const present = async (token: string, record: Omit<Verification, 'start' | 'status' | 'node'>, expected?: number) => {
    const node = Math.floor(Math.random() * 3)
    const start = now()
    let status = 0
    try {
      const response = await get(s.nodes[node]!.port, '/rest/v1/auth/verify', token)
      status = response.status
      if (status === 200 && expected !== undefined && JSON.parse(response.body).tokenVersion !== expected) status = -1
    } catch {
      status = 0 // timed out or refused: neither an accept nor a violation
    }
    verifications.push({ ...record, node, start, status })
  }

  const verifyOnce = async () => {
    const dice = Math.random()
    if (dice < REVOKED_SHARE && revokedTokens.length > 0) {
      const revoked = pick(revokedTokens)
      return present(revoked.token, { user: revoked.user, version: revoked.version, revokedEnd: revoked.end })
    }
    if (dice < REVOKED_SHARE + COMPANY_SHARE) {
      const member = pick(companyTokens)
      return present(member.token, { user: -1, version: 0, issuedEnd: member.issuedEnd })
    }
    const user = Math.floor(Math.random() * USERS)
    const u = users[user]!
    // Half current, half stale (the version just before the latest, or any older one).
    const versions = [...u.tokens.keys()]
    const version = Math.random() < 0.5 ? u.latest : Math.random() < 0.7 && u.tokens.has(u.latest - 1) ? u.latest - 1 : pick(versions)
    const token = u.tokens.get(version) ?? u.tokens.get(u.latest)!
    return present(token, { user, version: tokenVersion(token) }, tokenVersion(token))
  }

  const invalidateOnce = async () => {
    const user = Math.floor(Math.random() * USERS)
    counts.invalidationsTried++
    const start = now()
    const answer = await call(pick(nodes), 'POST', '/rest/v1/auth/invalidate-token', { ...creds, customerUserId: users[user]!.id }).catch(() => undefined)
    const end = now()
    writes.push({ start, end, status: answer?.status ?? 0 })
    if (answer?.status !== 200) return
    const version: number = answer.body.newTokenVersion
    invalidations.push({ user, version, end })
    const what = `invalidation of user-${user} (v${version})`
    streams.check(start, end, `tokens.invalidated:${users[user]!.id}:${version}`, what)
    const held = userSessions.get(user) ?? []
    const ended = held.filter((x) => !x.ended && x.version < version && x.openedEnd < end)
    if (ended.length) sessions.checkEnded(ended, end, what)
    userSessions.set(user, held.filter((x) => !x.ended))
    await fetchToken(user)
    const u = users[user]!
    if (holding && Math.random() < SESSION_SHARE) {
      const latest = u.latest
      for (const session of await sessions.openEverywhere(u.tokens.get(latest)!)) userSessions.get(user)!.push({ ...session, version: latest })
    }
  }

  // One more token of a user, revoked alone ("log out this device").
  const revokeTokenOnce = async () => {
    const user = Math.floor(Math.random() * USERS)
    counts.tokenRevocationsTried++
    const issued = await call(pick(nodes), 'POST', '/rest/v1/auth/token', { ...creds, userId: `user-${user}` }).catch(() => undefined)
    if (issued?.status !== 200) return
    const held = holding && Math.random() < SESSION_SHARE ? await sessions.openEverywhere(issued.body.token) : []
    // Half through RFC 7009's endpoint (SPEC §9.2): the same revocation, the same guarantee.
    const viaOAuth = Math.random() < 0.5
    const start = now()
    const answer = await (viaOAuth ? oauthRevoke(pick(nodes), creds, issued.body.token) : call(pick(nodes), 'POST', '/rest/v1/auth/revoke-token', { ...creds, token: issued.body.token })).catch(() => undefined)
    const end = now()
    if (answer?.status !== 200) return
    const what = `${viaOAuth ? 'POST /oauth2/revoke' : 'revoke-token'} of a token of user-${user}`
    if (held.length) sessions.checkEnded(held, end, what)
    streams.check(start, end, `token.revoked:${jtiOf(issued.body.token)}`, what)
    counts.tokenRevocationsOk++
    revokedTokens.push({ user, version: tokenVersion(issued.body.token), token: issued.body.token, end })
    if (revokedTokens.length > REVOKED_KEPT) revokedTokens.shift()
  }

  // A token that expires in a few seconds, revoked within REVOKE_AROUND_EXP_MS of its exp
  // through any node (node-2's clock calls it expired 1.5 s early), then presented until
  // every node's clock calls it expired (node-1's, 1.5 s late): the revocation must be
  // written whatever the revoking node's clock says, and kept while any clock within
  // MAX_CLOCK_SKEW may still accept the token.
  const untilWallClock = async (at: number) => {
    while (running && Date.now() < at) await sleep(Math.min(100, at - Date.now()))
  }
  const expiringOnce = async () => {
    const jti = crypto.randomUUID()
    const exp = Math.ceil(Date.now() / 1000) + EXPIRING_LIFE_S
    const token = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: hs256Kid() }, { ...pick(clockUsers), jti, iat: exp - EXPIRING_LIFE_S, exp })
    await untilWallClock(exp * 1000 + (Math.random() * 2 - 1) * REVOKE_AROUND_EXP_MS)
    if (!running) return
    counts.expiringRevocationsTried++
    const answer = await call(pick(nodes), 'POST', '/rest/v1/auth/revoke-token', { ...creds, token }).catch(() => undefined)
    const end = now()
    if (answer?.status !== 200) return
    counts.expiringRevocationsOk++
    while (running && Date.now() < exp * 1000 + PRESENT_PAST_EXP_MS) {
      await present(token, { user: -2, version: 0, revokedEnd: end })
      await sleep(PRESENT_EVERY_MS)
    }
  }

  let companyRevoking = false
  const revokeCompanyOnce = async () => {
    if (companyRevoking) return // one at a time: the checker's intervals stay simple
    companyRevoking = true
    counts.companyRevocationsTried++
    try {
      const start = now()
      const answer = await call(pick(nodes), 'POST', `/admin/v1/companies/${second.companyId}/revoke-tokens`, undefined, { authorization: `Bearer ${ADMIN_TOKEN}` }).catch(() => undefined)
      const end = now()
      if (answer?.status !== 200) return
      companyRevocations.push({ start, end })
      const ended = companySessions.filter((x) => !x.ended && x.issuedEnd < start && x.openedEnd < end)
      if (ended.length) sessions.checkEnded(ended, end, 'revoke-tokens of the second company')
      companySessions.splice(0, companySessions.length, ...companySessions.filter((x) => !x.ended))
      await Promise.all(Array.from({ length: COMPANY_USERS }, (_, i) => fetchCompanyToken(i)))
    } finally {
      companyRevoking = false
    }
  }

  /** Launches `run` as often as `perSecond` says since the load started; `launched` counts. */
  const pace = (perSecond: number, run: () => Promise<void>, launch: (run: () => Promise<void>) => void) => {
    let launched = 0
    return (elapsed: number) => {
      while (launched < elapsed * perSecond) {
        launched++
        launch(run)
      }
    }
  }
  const counted = (run: () => Promise<void>) => {
    inFlight++
    void run().finally(() => inFlight--)
  }
  const load = (async () => {
    const started = now()
    const paced = [
      pace(VERIFICATIONS_PER_S, verifyOnce, (run) => (inFlight >= MAX_IN_FLIGHT ? counts.skipped++ : counted(run))),
      pace(INVALIDATIONS_PER_S, invalidateOnce, counted),
      pace(TOKEN_REVOCATIONS_PER_S, revokeTokenOnce, counted),
      // Each lasts seconds (it waits for its exp): counted apart, so that the cap on
      // verifications in flight stays what it was.
      pace(EXPIRING_PER_S, expiringOnce, (run) => {
        expiringInFlight++
        void run().finally(() => expiringInFlight--)
      }),
      pace(COMPANY_REVOCATIONS_PER_S, revokeCompanyOnce, counted),
    ]
    while (running) {
      const elapsed = (now() - started) / 1000
      for (const step of paced) step(elapsed)
      await sleep(5)
    }
  })()

  const sampler = options.sampleReadiness
    ? (async () => {
        while (running) {
          await Promise.all(
            nodes.map(async (n, i) => {
              const at = now()
              const status = await call(n, 'GET', '/readyz').then((r) => r.status, () => 0)
              notReady[i]!.push({ at, ready: status === 200 })
            }),
          )
          await sleep(25)
        }
      })()
    : undefined

  const loadStarted = now()
  await sleep(3000) // steady state first
  for (const fault of faults) {
    const start = now()
    log(`fault: ${fault.name}`)
    await fault.run(s)
    // every node back to trusting its cache (or give up waiting after 15 s; the checker still runs)
    const recovered = await Promise.all(
      nodes.map(async (n, i) => {
        const ok = await waitFor(`node-${i} ready again`, async () => (await call(n, 'GET', '/readyz')).status, { until: (status) => status === 200, timeoutMs: 15_000, everyMs: 20 }).then(
          () => true,
          () => false,
        )
        return ok ? `node-${i} ${((now() - start) / 1000).toFixed(2)} s` : `node-${i} NOT READY after 15 s`
      }),
    )
    windows.push({ name: fault.name, start, end: now() })
    log(`  ready again (from the start of the fault): ${recovered.join(', ')}`)
    await sleep(1500)
  }
  await sleep(2000)
  running = false
  holding = false
  await load
  await sampler
  await waitFor('requests in flight to finish', () => inFlight + expiringInFlight, { until: (n) => n === 0, timeoutMs: REQUEST_TIMEOUT_MS * 2 })
  await Promise.all([sessions.settled(), streams.settled()])
  await streams.stop()
  const webhooks = await webhook.drain(WEBHOOK_DRAIN_MS, log)
  return {
    loadStarted,
    loadSeconds: (now() - loadStarted) / 1000,
    verifications,
    skipped: counts.skipped,
    invalidations,
    invalidationsTried: counts.invalidationsTried,
    companyRevocations,
    companyRevocationsTried: counts.companyRevocationsTried,
    tokenRevocationsTried: counts.tokenRevocationsTried,
    tokenRevocationsOk: counts.tokenRevocationsOk,
    expiringRevocationsTried: counts.expiringRevocationsTried,
    expiringRevocationsOk: counts.expiringRevocationsOk,
    windows,
    writes,
    notReady: options.sampleReadiness ? notReady : undefined,
    sessions: { ...sessions.counts, refusedCodes: sessions.refusedCodes, findings: sessions.findings },
    streams: { findings: streams.findings, unchecked: streams.unchecked() },
    webhooks,
    webhookDrainMs: WEBHOOK_DRAIN_MS,
  }
}
