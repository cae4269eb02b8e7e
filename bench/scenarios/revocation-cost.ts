/**
 * revocation-cost: the cost of the wider revocations on verify's hot path, in process (no HTTP, so the
 * noise of a shared machine's network stack stays out): the same verifier over the same
 * cached users, A = no revocation anywhere, B = 10,000 revoked jtis in the node's map and a
 * company-wide revoke (the company's tokens generation is 1, the tokens carry cgen 1).
 * A and B alternate (in both orders), several rounds; medians of ns per verification.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { createTokenVerifier } from '../../src/auth/verify.js'
import { createMemoryBus } from '../../src/bus/memory-bus.js'
import { createStates } from '../../src/cache/states.js'
import { createKeyring } from '../../src/jwt/keyring.js'
import type { Store } from '../../src/store/store.js'
import { common, number } from '../lib/args.js'
import { defineScenario } from '../lib/scenario.js'

const SECRET = randomBytes(48).toString('base64url')

/** The users, their company and agent: the same for both variants. */
interface World {
  ids: string[]
  companyId: string
  agentId: string
}

async function setUp(withRevocations: boolean, { ids, companyId, agentId }: World, revoked: number) {
  const users = ids.length
  const generation = withRevocations ? 1 : 0
  const store = {
    getUsers: async (asked: string[]) => asked.map((id) => ({ id, companyId, externalId: 'u-' + id.slice(0, 8), agentId, tokenVersion: 0, active: true, revision: 0 })),
    getAgents: async (asked: string[]) => asked.map((id) => ({ id, companyId, name: 'agent', active: true, tokensGeneration: 0, revision: 0 })),
    getApiKeyStates: async () => [],
    getCompanyStates: async (asked: string[]) => asked.map((id) => ({ id, tokensGeneration: generation, revision: generation })),
    revokedJtis: async () => [],
    revokedAmong: async () => [],
  } as unknown as Store
  const states = createStates(store, createMemoryBus(), users * 2)
  await new Promise((resolve) => setImmediate(resolve)) // the (empty) load of the revoked map lands
  const exp = Math.floor(Date.now() / 1000) + 86400
  if (withRevocations) for (let i = 0; i < revoked; i++) states.revokedTokens.add({ jti: randomUUID(), exp })
  const keyring = createKeyring({ keys: [], issuer: undefined, audience: undefined, clockToleranceSeconds: 0 }, [{ alg: 'HS256', secret: SECRET }])
  const iat = Math.floor(Date.now() / 1000)
  const tokens = ids.map((sub) => keyring.sign({ sub, tokenVersion: 0, companyId, agentId, iat, exp, jti: randomUUID(), cgen: generation, agen: 0 }))
  const verify = createTokenVerifier({ keyring, states, clockToleranceSeconds: 0 })
  // Warm: every user, agent and company cached, every token in the keyring's verified cache.
  for (const token of tokens) {
    const verdict = await verify(token)
    if (!verdict.ok) throw new Error(`setup: a token was refused: ${verdict.denial.code}`)
  }
  return { verify, tokens, states }
}

function run(verify: ReturnType<typeof createTokenVerifier>, tokens: string[], verifies: number): number {
  let ok = 0
  const started = process.hrtime.bigint()
  for (let i = 0; i < verifies; i++) {
    const verdict = verify(tokens[i % tokens.length]!)
    if (verdict instanceof Promise) throw new Error('a cached verification returned a promise')
    if (verdict.ok) ok++
  }
  const ns = Number(process.hrtime.bigint() - started) / verifies
  if (ok !== verifies) throw new Error(`${verifies - ok} verifications refused`)
  return ns
}

export default defineScenario({
  name: 'revocation-cost',
  description: 'cached verification with no revocation vs N revoked jtis and a company revoke, in process (ns per verification)',
  options: {
    users: common.users(10_000, 500),
    revocations: number("revoked jtis in the node's filter", { default: 10_000, smoke: 500 }),
    rounds: common.rounds(7, 2),
    verifies: number('verifications per round and variant', { default: 200_000, smoke: 5000 }),
  },
  smoke: true,
  async run(ctx) {
    const { users, revocations: revoked, rounds, verifies } = ctx.opts
    const world = { ids: Array.from({ length: users }, () => randomUUID()), companyId: randomUUID(), agentId: randomUUID() }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
    const a = await setUp(false, world, revoked)
    ctx.defer(() => a.states.close())
    const b = await setUp(true, world, revoked)
    ctx.defer(() => b.states.close())
    if (b.states.revokedTokens.stats().entries !== revoked) throw new Error('the revoked map does not hold what was added')
    const nsA: number[] = []
    const nsB: number[] = []
    // The order alternates too: whichever runs second pays for the first one's garbage.
    for (let round = 0; round < rounds; round++) {
      if (round % 2 === 0) {
        nsA.push(run(a.verify, a.tokens, verifies))
        nsB.push(run(b.verify, b.tokens, verifies))
      } else {
        nsB.push(run(b.verify, b.tokens, verifies))
        nsA.push(run(a.verify, a.tokens, verifies))
      }
    }
    const ma = median(nsA)
    const mb = median(nsB)
    return {
      scenario: 'revocation-cost',
      title: `revocation-cost: verify, cached, ${users.toLocaleString('en-US')} users, ${rounds} alternating rounds of ${verifies.toLocaleString('en-US')}`,
      tables: [
        {
          headers: ['', 'ns per verification (median)', 'rounds'],
          rows: [
            ['no revocations', ma.toFixed(0), nsA.map((x) => x.toFixed(0)).join(' ')],
            [`${revoked.toLocaleString('en-US')} revoked jtis and a company revoke`, mb.toFixed(0), nsB.map((x) => x.toFixed(0)).join(' ')],
          ],
        },
      ],
      lines: [`with revocations: ${((mb / ma - 1) * 100).toFixed(1)} %`],
      data: { users, revoked, nsA, nsB },
    }
  },
})
