import { randomUUID } from 'node:crypto'
import t from 'tap'
import type { ChangeHandler } from '../../src/bus/bus.js'
import type { VerifiedClaims, Verdict } from '../../src/auth/verify.js'
import { appliedChange, type AgentState, type CompanyState, type UserState } from '../../src/domain.js'
import { createSessions, type SessionsOptions } from '../../src/sessions/sessions.js'

/** Waits until `done()` holds, for at most two seconds (a busy machine delays timers). */
async function until(done: () => boolean): Promise<void> {
  const started = Date.now()
  while (!done() && Date.now() - started < 2000) await new Promise((resolve) => setTimeout(resolve, 5))
}

/**
 * The session registry alone (src/sessions/), its changes handed to it as the change
 * pipeline would (src/change-pipeline.ts), its store reads kept in maps: what a change finds, what it costs when it finds nothing, what a
 * failed read does, the expiry heap's order. The real nodes are in test/system/nodes/sessions.test.ts.
 */
const COMPANY = randomUUID()
const AGENT = randomUUID()

function world(options: { failReads?: () => boolean; hangReads?: () => boolean } = {}) {
  const users = new Map<string, UserState>()
  const agents = new Map<string, AgentState>([[AGENT, { id: AGENT, companyId: COMPANY, name: 'a', active: true, tokensGeneration: 0, revision: 1 }]])
  const companies = new Map<string, CompanyState>([[COMPANY, { id: COMPANY, tokensGeneration: 0, revision: 1 }]])
  const revoked = new Set<string>()
  const reads: string[] = []
  const read = <T>(name: string, rows: T[]) => {
    reads.push(name)
    if (options.hangReads?.()) return new Promise<T[]>(() => {})
    return options.failReads?.() ? Promise.reject(new Error('store away')) : Promise.resolve(rows)
  }
  let trusted = true
  const claimsOf = new Map<string, VerifiedClaims>()
  const verifyToken: SessionsOptions['verifyToken'] = (token): Verdict => {
    const claims = token === undefined ? undefined : claimsOf.get(token)
    if (claims === undefined) return { ok: false, denial: { code: 'INVALID_TOKEN', message: 'Invalid token' } }
    const user = users.get(claims.sub)!
    return {
      ok: true,
      claims,
      identity: { user: { id: user.id, externalId: user.externalId, companyId: user.companyId, agentId: claims.agentId }, agent: { id: AGENT, name: agents.get(AGENT)!.name, active: true }, tokenVersion: user.tokenVersion, exp: claims.exp },
    }
  }
  const sessions = createSessions({
    verifyToken,
    bus: { trusted: () => trusted },
    store: {
      getUsers: (ids) => read('users', ids.flatMap((id) => (users.has(id) ? [{ ...users.get(id)!, createdAt: new Date() }] : []))) as never,
      getAgents: (ids) => read('agents', ids.flatMap((id) => (agents.has(id) ? [{ ...agents.get(id)!, createdAt: new Date() }] : []))) as never,
      getCompanyStates: (ids) => read('companies', ids.flatMap((id) => (companies.has(id) ? [companies.get(id)!] : []))),
      revokedAmong: (jtis) => read('jtis', jtis.filter((jti) => revoked.has(jti))),
    },
    clockToleranceSeconds: 0,
    recheckEveryMs: 20,
  })
  t.teardown(() => sessions.close())
  /** a user and a token of theirs */
  const token = (expiresInMs = 3_600_000, jti: string = randomUUID()) => {
    const id = randomUUID()
    users.set(id, { id, companyId: COMPANY, externalId: id, agentId: AGENT, tokenVersion: 0, active: true, revision: 1 })
    const value = `token-${jti}`
    claimsOf.set(value, { sub: id, tokenVersion: 0, companyId: COMPANY, agentId: AGENT, exp: (Date.now() + expiresInMs) / 1000, jti })
    return { value, userId: id, jti }
  }
  const opened = async (value: string) => {
    const session = await sessions.open(value)
    if (!session.ok) throw new Error('refused')
    return session
  }
  return { sessions, users, agents, companies, revoked, reads, token, opened, deliver: (change: Parameters<ChangeHandler>[0]) => sessions.onChange(appliedChange(change)), epoch: () => sessions.onEpoch(), setTrusted: (value: boolean) => void (trusted = value) }
}

t.test('a change with no session of its row costs nothing: no read, no promise', async (t) => {
  const w = world()
  const session = await w.opened(w.token().value)
  for (const kind of ['user', 'agent', 'company', 'token', 'apiKey'] as const) t.equal(w.deliver({ kind, id: randomUUID(), revision: 2 }), 0, kind)
  t.same(w.reads, [])
  t.notOk(session.signal.aborted)
})

t.test("a row's change re-reads that row and aborts what it ends before its promise settles", async (t) => {
  const w = world()
  const { value, userId } = w.token()
  const kept = await w.opened(w.token().value)
  const session = await w.opened(value)
  w.users.set(userId, { ...w.users.get(userId)!, tokenVersion: 1, revision: 2 })
  const done = w.deliver({ kind: 'user', id: userId, revision: 2 })
  t.ok(done instanceof Promise, 'the acknowledgement waits')
  t.notOk(session.signal.aborted)
  await done
  t.same(session.signal.reason, { code: 'TOKEN_REVOKED', message: 'Token has been revoked' })
  t.same(w.reads, ['users'])
  t.notOk(kept.signal.aborted)

  const agentSession = await w.opened(w.token().value)
  w.agents.set(AGENT, { ...w.agents.get(AGENT)!, active: false, revision: 2 })
  await w.deliver({ kind: 'agent', state: w.agents.get(AGENT)! })
  t.same(agentSession.signal.reason, { code: 'AGENT_INACTIVE', message: 'Agent is inactive' })
  t.same(kept.signal.reason, { code: 'AGENT_INACTIVE', message: 'Agent is inactive' }, 'every session of the agent')
  t.same(w.sessions.stats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
})

t.test('a revoked jti aborts its session without a read', async (t) => {
  const w = world()
  const { value, jti } = w.token()
  const session = await w.opened(value)
  t.equal(w.deliver({ kind: 'token', jti, exp: 1 }), 1, 'no read, no promise: the one session, ended at once')
  t.same(session.signal.reason, { code: 'TOKEN_REVOKED', message: 'Token has been revoked' })
  t.same(w.reads, [])
})

t.test('a re-check that cannot read the store ends the sessions it was for (SERVICE_UNAVAILABLE), and still lets the change be acknowledged', async (t) => {
  let fail = false
  const w = world({ failReads: () => fail })
  const { value, userId } = w.token()
  const session = await w.opened(value)
  const other = await w.opened(w.token().value)
  fail = true
  await w.deliver({ kind: 'user', id: userId, revision: 2 })
  t.same(session.signal.reason, { code: 'SERVICE_UNAVAILABLE', message: 'Service temporarily unavailable' })
  t.notOk(other.signal.aborted, 'only the sessions of the row')
  w.setTrusted(false)
  await new Promise((resolve) => setTimeout(resolve, 60))
  t.notOk(other.signal.aborted, 'a sweep that cannot read ends nothing')
})

t.test('an epoch, and every period while untrusted, re-check every session in batched reads', async (t) => {
  const w = world()
  const tokens = Array.from({ length: 20 }, () => w.token())
  const sessions = await Promise.all(tokens.map(({ value }) => w.opened(value)))
  w.revoked.add(tokens[3]!.jti)
  w.epoch()
  await until(() => sessions[3]!.signal.aborted)
  t.same(sessions[3]!.signal.reason, { code: 'TOKEN_REVOKED', message: 'Token has been revoked' })
  t.same(w.reads.sort(), ['agents', 'companies', 'jtis', 'users'], 'one read per table for all of them')
  w.users.delete(tokens[5]!.userId)
  t.notOk(sessions[5]!.signal.aborted, 'trusted: no sweep')
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.notOk(sessions[5]!.signal.aborted, 'trusted: still no sweep')
  w.setTrusted(false)
  await until(() => sessions[5]!.signal.aborted)
  t.same(sessions[5]!.signal.reason, { code: 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE', message: 'Customer user not found or inactive' })
  t.equal(sessions.filter((s) => s.signal.aborted).length, 2)
})

t.test('an open whose checks raced a change reads the store again before it answers', async (t) => {
  const w = world()
  const { value, userId } = w.token()
  const opening = w.sessions.open(value)
  // the change lands while the open awaits its verdict
  w.users.set(userId, { ...w.users.get(userId)!, active: false, revision: 2 })
  void w.deliver({ kind: 'user', id: userId, revision: 2 })
  t.same(await opening, { ok: false, denial: { code: 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE', message: 'Customer user not found or inactive' } })
  t.same(w.sessions.stats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
})

t.test('expiry: one heap, in order; closed sessions never fire', async (t) => {
  const w = world()
  const order: number[] = []
  const sessions = await Promise.all(
    Array.from({ length: 200 }, async (_, i) => {
      const session = await w.opened(w.token(20 + ((i * 37) % 150)).value)
      session.signal.addEventListener('abort', () => order.push(Date.now()))
      return session
    }),
  )
  for (const session of sessions.filter((_, i) => i % 3 === 0)) session.close()
  await until(() => order.length >= sessions.length - Math.ceil(sessions.length / 3))
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.equal(order.length, sessions.length - Math.ceil(sessions.length / 3), 'every open one expired, no closed one')
  t.ok(sessions.every((s, i) => (i % 3 === 0 ? !s.signal.aborted : (s.signal.reason as { code: string }).code === 'TOKEN_EXPIRED')))
  t.same(w.sessions.stats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
})

t.test('100,000 opens and closes leave every index empty', async (t) => {
  const w = world()
  for (let i = 0; i < 100_000; i++) (await w.opened(w.token().value)).close()
  t.same(w.sessions.stats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
})

t.test('closing aborts every open session with NODE_CLOSING, and opens no more', async (t) => {
  const w = world()
  const session = await w.opened(w.token().value)
  w.sessions.close()
  t.same(session.signal.reason, { code: 'NODE_CLOSING', message: 'The node is shutting down' })
  await t.rejects(w.sessions.open(w.token().value), { name: 'StoreUnavailableError' })
})

t.test('one token open twice, one user on many tokens: each change finds every session of its row, closing one leaves the others', async (t) => {
  const w = world()
  const { value, jti, userId } = w.token()
  const [a, b, c] = [await w.opened(value), await w.opened(value), await w.opened(value)]
  b.close()
  t.same(w.sessions.stats(), { open: 2, users: 1, companies: 1, agents: 1, jtis: 1, expiries: 2 })
  t.equal(w.deliver({ kind: 'token', id: jti, revision: 1 }), 2, 'the two open ones ended')
  t.ok(a.signal.aborted && c.signal.aborted && !b.signal.aborted, 'both open ones aborted, the closed one not')
  t.same(w.sessions.stats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
  t.same(w.users.get(userId)?.id, userId)
})

t.test("an agent's sessions, linked through themselves: closing any of them leaves the others found by its agent's and its company's changes", async (t) => {
  const w = world()
  const opened = async () => w.opened(w.token().value)
  const first = [await opened(), await opened(), await opened(), await opened(), await opened()]
  // renamed: the sessions opened from now on are another cohort of the same agent
  w.agents.set(AGENT, { ...w.agents.get(AGENT)!, name: 'b', revision: 2 })
  const renamed = [await opened(), await opened()]
  t.same([first[0]!.identity.agent.name, renamed[0]!.identity.agent.name], ['a', 'b'], 'each as verified when it opened')
  t.same(w.sessions.stats(), { open: 7, users: 7, companies: 1, agents: 1, jtis: 7, expiries: 7 })
  // the last opened is at the head of its list: close two neighbours in the middle, then the head
  for (const session of [first[3]!, first[2]!, first[4]!, renamed[1]!]) session.close()
  await w.deliver({ kind: 'company', id: COMPANY, revision: 2 })
  t.equal(w.sessions.size, 3, "a company's change that ends nothing leaves them open")
  w.agents.set(AGENT, { ...w.agents.get(AGENT)!, active: false, revision: 3 })
  await w.deliver({ kind: 'agent', id: AGENT, revision: 3 })
  t.same(
    [...first, ...renamed].map((s) => (s.signal.reason as { code: string } | undefined)?.code),
    ['AGENT_INACTIVE', 'AGENT_INACTIVE', undefined, undefined, undefined, 'AGENT_INACTIVE', undefined],
    'every open one ended, no closed one',
  )
  t.same(w.sessions.stats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
})

t.test('a jti kept as four integers: each revocation finds its own session, also when two share the first 32 bits; any other jti as is', async (t) => {
  const w = world()
  const jtis = [
    'deadbeef-0000-4000-8000-000000000001',
    'deadbeef-ffff-4fff-bfff-ffffffffffff', // the same index key as the first
    'not-a-uuid',
    'DEADBEEF-0000-4000-8000-000000000001', // not canonical: kept as is, not as the first's words
  ]
  const sessions = await Promise.all(jtis.map((jti) => w.opened(w.token(3_600_000, jti).value)))
  t.same(
    sessions.map((s) => s.jti),
    jtis,
    'each jti read back as it came',
  )
  const aborted = () => sessions.map((s) => s.signal.aborted)
  t.equal(w.deliver({ kind: 'token', id: 'deadbeef-0000-4000-8000-00000000000f', revision: 1 }), 0, 'a jti that shares the key but is none of them ends nothing')
  t.same(aborted(), [false, false, false, false])
  w.deliver({ kind: 'token', id: jtis[0]!, revision: 1 })
  t.same(aborted(), [true, false, false, false], 'the first alone')
  w.deliver({ kind: 'token', id: jtis[2]!, revision: 1 })
  t.same(aborted(), [true, false, true, false])
  // a sweep asks the store about each jti: the one rebuilt from its words is the token's
  w.revoked.add(jtis[1]!)
  w.revoked.add(jtis[3]!)
  w.epoch()
  await until(() => sessions.every((s) => s.signal.aborted))
  t.same(aborted(), [true, true, true, true], 'the sweep found the other two revoked')
  t.same(w.sessions.stats(), { open: 0, users: 0, companies: 0, agents: 0, jtis: 0, expiries: 0 })
})

t.test("a change's read that does not answer within half the period ends its sessions, so the acknowledgement is never held past the lease", async (t) => {
  let hang = false
  const w = world({ hangReads: () => hang })
  const { value, userId } = w.token()
  const session = await w.opened(value)
  hang = true
  const started = Date.now()
  await w.deliver({ kind: 'user', id: userId, revision: 2 })
  const waited = Date.now() - started
  t.ok(waited >= 9 && waited < 1000, `settled after ${waited} ms (deadline 10 ms)`)
  t.same(session.signal.reason, { code: 'SERVICE_UNAVAILABLE', message: 'Service temporarily unavailable' })
})

t.test("an open that raced only other rows' changes reads nothing more; past the ring's 1,024 changes it reads", async (t) => {
  const w = world()
  const opening = w.sessions.open(w.token().value)
  for (let i = 0; i < 1000; i++) void w.deliver({ kind: 'user', id: randomUUID(), revision: 2 })
  t.equal((await opening).ok, true)
  t.same(w.reads, [], 'no read')
  const flooded = w.sessions.open(w.token().value)
  for (let i = 0; i < 1025; i++) void w.deliver({ kind: 'agent', id: randomUUID(), revision: 2 })
  t.equal((await flooded).ok, true)
  t.same(w.reads.sort(), ['agents', 'companies', 'jtis', 'users'], 'one batched re-check')
})
