/**
 * The cost of the wider revocations on verify's hot path, in process (no HTTP, so the
 * noise of a shared machine's network stack stays out): the same verifier over the same
 * cached users, A = no revocation anywhere, B = 10,000 revoked jtis in the node's map and a
 * company-wide revoke (the company's tokens generation is 1, the tokens carry cgen 1).
 * A and B alternate (in both orders), several rounds; medians of ns per verification.
 *
 *   node dist/bench/revocation-cost.js [--users 10000] [--revoked 10000] [--rounds 7] [--verifies 200000]
 */
import { randomBytes, randomUUID } from 'node:crypto'
import { parseArgs } from 'node:util'
import { createMemoryBus } from '../src/bus/memory-bus.js'
import { createStates } from '../src/cache/states.js'
import { createKeyring } from '../src/jwt/keyring.js'
import { createTokenVerifier } from '../src/auth/verify.js'
import type { Store } from '../src/store/store.js'

const { values } = parseArgs({
  options: { users: { type: 'string', default: '10000' }, revoked: { type: 'string', default: '10000' }, rounds: { type: 'string', default: '7' }, verifies: { type: 'string', default: '200000' } },
})
const users = Number(values.users)
const revoked = Number(values.revoked)
const rounds = Number(values.rounds)
const verifies = Number(values.verifies)

const companyId = randomUUID()
const agentId = randomUUID()
const ids = Array.from({ length: users }, () => randomUUID())

async function setUp(withRevocations: boolean) {
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

const SECRET = randomBytes(48).toString('base64url')

function run(verify: ReturnType<typeof createTokenVerifier>, tokens: string[]): number {
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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const a = await setUp(false)
const b = await setUp(true)
if (b.states.revokedTokens.stats().entries !== revoked) throw new Error('the revoked map does not hold what was added')
const nsA: number[] = []
const nsB: number[] = []
// The order alternates too: whichever runs second pays for the first one's garbage.
for (let round = 0; round < rounds; round++) {
  if (round % 2 === 0) {
    nsA.push(run(a.verify, a.tokens))
    nsB.push(run(b.verify, b.tokens))
  } else {
    nsB.push(run(b.verify, b.tokens))
    nsA.push(run(a.verify, a.tokens))
  }
}
const ma = median(nsA)
const mb = median(nsB)
console.log(
  `verify, cached, ${users.toLocaleString('en-US')} users, ${rounds} alternating rounds of ${verifies.toLocaleString('en-US')}: ` +
    `no revocations ${ma.toFixed(0)} ns, with ${revoked.toLocaleString('en-US')} revoked jtis and a company revoke ${mb.toFixed(0)} ns (${((mb / ma - 1) * 100).toFixed(1)} %); ` +
    `rounds A [${nsA.map((x) => x.toFixed(0)).join(' ')}] B [${nsB.map((x) => x.toFixed(0)).join(' ')}]`,
)
a.states.close()
b.states.close()
