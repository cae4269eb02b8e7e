/**
 * sessions: what open sessions (SPEC §8.1, src/sessions/) cost a node, in process (no HTTP, so the
 * noise of a shared machine's network stack stays out), over the same verifier and caches
 * a node uses, with an in-memory stand-in for the store's reads:
 *
 * - heap per open session, with N sessions open (one per user), after a full GC;
 * - heap left behind by N opens and closes, three rounds;
 * - a change for a user with 10 open sessions among N, against one for a user with none
 *   (the time until the change's handlers settle, i.e. until the node may acknowledge);
 * - cached verification with N sessions open against none (the same verifier, alternating).
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { createTokenVerifier } from '../../src/auth/verify.js'
import { createMemoryBus } from '../../src/bus/memory-bus.js'
import { createStates } from '../../src/cache/states.js'
import { openChangePipeline, someSteps } from '../../src/change-pipeline.js'
import type { UserState } from '../../src/domain.js'
import { createKeyring } from '../../src/jwt/keyring.js'
import { chatSessionOf } from '../../src/plugin.js'
import { createSessions } from '../../src/sessions/sessions.js'
import type { Store } from '../../src/store/store.js'
import { common, number } from '../lib/args.js'
import { defineScenario } from '../lib/scenario.js'

export default defineScenario({
  name: 'sessions',
  description: 'open sessions in process: heap per session, nothing left after closes, a change with 10 sessions of its user, verification with N open',
  options: {
    sessions: number('sessions open (one per user)', { default: 100_000, smoke: 500 }),
    rounds: common.rounds(7, 2),
    changes: number("changes of a user's version, each way", { default: 2000, smoke: 20 }),
    verifies: number('verifications per round and variant', { default: 200_000, smoke: 5000 }),
  },
  smoke: true,
  exposeGc: true,
  async run(ctx) {
    const { sessions: count, rounds, changes, verifies } = ctx.opts
    const lines: string[] = []
    const gc = (globalThis as { gc?: () => void }).gc
    if (!gc) throw new Error('run with node --expose-gc (the runner does when memory or sessions is named)')
    const heap = () => {
      gc()
      gc()
      return process.memoryUsage().heapUsed
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

    const companyId = randomUUID()
    const agentId = randomUUID()
    const SECRET = randomBytes(48).toString('base64url')
    const ids = Array.from({ length: count + 2 }, () => randomUUID())
    const rows = new Map<string, UserState>(ids.map((id) => [id, { id, companyId, externalId: 'u-' + id.slice(0, 8), agentId, tokenVersion: 0, active: true, revision: 0 }]))
    const store = {
      getUsers: async (asked: string[]) => asked.flatMap((id) => (rows.has(id) ? [rows.get(id)!] : [])),
      getAgents: async (asked: string[]) => asked.map((id) => ({ id, companyId, name: 'agent', active: true, tokensGeneration: 0, revision: 0 })),
      getApiKeyStates: async () => [],
      getCompanyStates: async (asked: string[]) => asked.map((id) => ({ id, tokensGeneration: 0, revision: 0 })),
      revokedJtis: async () => [],
      revokedAmong: async () => [],
    } as unknown as Store

    const bus = createMemoryBus()
    const states = createStates(store, bus, count * 2)
    await new Promise((resolve) => setTimeout(resolve, 10)) // the (empty) load of the revoked tokens lands
    const keyring = createKeyring({ keys: [], issuer: undefined, audience: undefined, clockToleranceSeconds: 0 }, [{ alg: 'HS256', secret: SECRET }])
    const iat = Math.floor(Date.now() / 1000)
    const exp = iat + 86400
    const tokenOf = (sub: string) => keyring.sign({ sub, tokenVersion: 0, companyId, agentId, iat, exp, jti: randomUUID(), cgen: 0, agen: 0 })
    const tokens = ids.map(tokenOf)
    const verifyToken = createTokenVerifier({ keyring, states, clockToleranceSeconds: 0 })
    const sessions = createSessions({ verifyToken, bus, store, clockToleranceSeconds: 0, recheckEveryMs: 500 })
    openChangePipeline(bus, someSteps({ caches: states, sessions }))
    // Warm: every user cached, every token in the keyring's verified cache (so opening costs no parse).
    for (const token of tokens) if (!(await verifyToken(token)).ok) throw new Error('setup: a token was refused')

    type Open = { close: () => void; signal: AbortSignal }
    /** As a chat server opens them (what `openChatSession` answers), each signal read at once, as a caller that listens to it does. */
    async function openAll(from: number, to: number): Promise<Open[]> {
      const opened: Open[] = []
      for (let i = from; i < to; i++) {
        const handle = chatSessionOf(await sessions.open(tokens[i]))
        if (!handle.ok) throw new Error(`a session was refused: ${handle.body.code}`)
        if (handle.signal.aborted) throw new Error('a session was aborted as it opened')
        opened.push(handle)
      }
      return opened
    }

    // ── heap per open session ──
    const before = heap()
    let open = await openAll(0, count)
    const perSession = (heap() - before) / count
    lines.push(`${count.toLocaleString('en-US')} sessions open: ${perSession.toFixed(0)} B heap per session (after a full GC; ${JSON.stringify(sessions.stats())})`)
    for (const s of open) s.close()
    open = []

    // ── opens and closes leave nothing behind ──
    const baseline = heap()
    const growth: number[] = []
    for (let round = 1; round <= 3; round++) {
      const opened = await openAll(0, count)
      for (const s of opened) s.close()
      growth.push(heap() - baseline)
    }
    lines.push(`${count.toLocaleString('en-US')} opens and closes, 3 rounds: heap vs before ${growth.map((b) => `${(b / 2 ** 20).toFixed(2)} MB`).join(', ')}; stats ${JSON.stringify(sessions.stats())}`)

    // ── a change for a user with 10 sessions among N, against one for a user with none ──
    open = await openAll(0, count)
    const busy = ids[count]!
    const idle = ids[count + 1]!
    let version = 0
    async function changeMs(userId: string, withSessions: number): Promise<number> {
      const mine = await Promise.all(Array.from({ length: withSessions }, () => sessions.open(tokenOf(userId))))
      const state = { ...rows.get(userId)!, tokenVersion: ++version, revision: version }
      rows.set(userId, state)
      const started = process.hrtime.bigint()
      await bus.publish({ kind: 'user', state })
      const ns = Number(process.hrtime.bigint() - started)
      for (const s of mine) {
        if (!s.ok) continue
        if (!s.signal.aborted) throw new Error('a session the change ended is still open')
        s.close()
      }
      // back to version 0, as the tokens carry, for the next round
      rows.set(userId, { ...state, tokenVersion: 0 })
      await bus.publish({ kind: 'user', state: { ...state, tokenVersion: 0, revision: ++version } })
      return ns / 1e6
    }
    const tenMs: number[] = []
    const noneMs: number[] = []
    for (let i = 0; i < changes; i++) {
      if (i % 2 === 0) {
        tenMs.push(await changeMs(busy, 10))
        noneMs.push(await changeMs(idle, 0))
      } else {
        noneMs.push(await changeMs(idle, 0))
        tenMs.push(await changeMs(busy, 10))
      }
    }
    const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))]!.toFixed(3)
    lines.push(
      `a user's change with ${count.toLocaleString('en-US')} other sessions open, until its handlers settle: 10 sessions of that user median ${q(tenMs, 0.5)} ms (p99 ${q(tenMs, 0.99)}), ` +
        `none median ${q(noneMs, 0.5)} ms (p99 ${q(noneMs, 0.99)}); ${changes} each, alternating`,
    )

    // ── cached verification with N sessions open, against none ──
    // verify-hot's working set: tokens the keyring's verified-token LRU (20,000) holds
    const hot = Math.min(count, 10_000)
    function verifyNs(): number {
      let ok = 0
      const started = process.hrtime.bigint()
      for (let i = 0; i < verifies; i++) {
        const verdict = verifyToken(tokens[i % hot]!)
        if (verdict instanceof Promise) throw new Error('a cached verification returned a promise')
        if (verdict.ok) ok++
      }
      if (ok !== verifies) throw new Error(`${verifies - ok} verifications refused`)
      return Number(process.hrtime.bigint() - started) / verifies
    }
    const withOpen: number[] = []
    const without: number[] = []
    for (let round = 0; round < rounds; round++) {
      // alternate the order: whichever runs second pays for the first one's garbage
      const measureWith = () => withOpen.push(verifyNs())
      const measureWithout = async () => {
        for (const s of open) s.close()
        without.push(verifyNs())
        open = await openAll(0, count)
      }
      if (round % 2 === 0) {
        measureWith()
        await measureWithout()
      } else {
        await measureWithout()
        measureWith()
      }
    }
    lines.push(
      `cached verification (${hot.toLocaleString('en-US')} hot tokens): ${median(withOpen).toFixed(0)} ns with ${count.toLocaleString('en-US')} sessions open, ${median(without).toFixed(0)} ns with none ` +
        `(ratio ${(median(without) / median(withOpen)).toFixed(2)}×; medians of ${rounds} rounds of ${verifies.toLocaleString('en-US')})`,
    )
    for (const s of open) s.close()
    sessions.close()
    states.close()
    return { scenario: 'sessions', title: `sessions: ${count.toLocaleString('en-US')} open sessions, in process`, lines }
  },
})
