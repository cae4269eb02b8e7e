import t, { type Test } from 'tap'
import { createMemoryBus } from '../../../src/bus/memory-bus.js'
import type { Db } from '../../../src/store/db.js'
import type { InvalidationBus } from '../../../src/bus/bus.js'
import { createTenant, decodeToken, errorBody, issueToken, post, sharedDb, startApp, verify, type Teardown, type Tenant, type TestApp } from '../../support/helpers.js'

/**
 * The key rotation of docs/operations.md, on two nodes of one store: phase 1 adds the new key as a
 * verify-only second key everywhere (`[old, new]`), phase 2 puts it first (`[new, old]`).
 * Nodes are restarted one at a time, so every step has a node of each phase beside the
 * other. The nodes share one in-process bus, as nodes over Redis share the channel (that the
 * Redis bus's message keys still match in every phase is checked in test/system/deploy/jwt.test.ts).
 */
const OLD = { alg: 'HS256', secret: 'the-old-signing-secret-of-the-rotation-test-0123' }
const NEW = { alg: 'HS256', secret: 'the-new-signing-secret-of-the-rotation-test-4567' }
const keys = (...list: Array<typeof OLD>) => ({ JWT_SECRET: '', JWT_KEYS: JSON.stringify(list) })

const UNKNOWN_KEY = errorBody(400, 'Token is signed with a key this node does not know (a key rotation under way?)', 'TOKEN_KEY_UNKNOWN')

interface Deployment {
  db: Db
  bus: InvalidationBus
  tenant?: Tenant
}

async function node(t: Teardown, deployment: Deployment, ...list: Array<typeof OLD>): Promise<TestApp> {
  return startApp(t, keys(...list), { db: deployment.db, bus: deployment.bus })
}

function revokeToken(node: TestApp, tenant: Tenant, token: string) {
  return post(node, '/rest/v1/auth/revoke-token', { keyId: tenant.keyId, keySecret: tenant.keySecret, token })
}

let users = 0

/** A token of each node verifies on both; each node revokes the other's, and then both refuse it. */
async function interoperate(t: Test, a: TestApp, b: TestApp, tenant: Tenant, step: string): Promise<void> {
  for (const [issuer, peer] of [
    [a, b],
    [b, a],
  ] as const) {
    const name = `${step}: a token of ${issuer === a ? 'a' : 'b'}`
    const issued = await issueToken(issuer, tenant, `user-${++users}`)
    t.equal((await verify(issuer, issued.token)).statusCode, 200, `${name} verifies on its own node`)
    t.equal((await verify(peer, issued.token)).statusCode, 200, `${name} verifies on the other node`)
    const revoked = await revokeToken(peer, tenant, issued.token)
    t.equal(revoked.statusCode, 200, `${name} is revoked by the other node`)
    for (const which of [issuer, peer]) {
      const refused = await verify(which, issued.token)
      t.equal(refused.json().code, 'TOKEN_REVOKED', `${name} is then refused on ${which === issuer ? 'its own' : 'the other'} node`)
    }
  }
}

t.test('the two-phase rotation: at every step a token of either node verifies, and is revoked, on both', async (t) => {
  const deployment: Deployment = { db: await sharedDb(t), bus: createMemoryBus() }
  const a0 = await node(t, deployment, OLD)
  const b0 = await node(t, deployment, OLD)
  const tenant = await createTenant(a0, 'rotation co')
  await interoperate(t, a0, b0, tenant, 'before')
  const oldKid = decodeToken((await issueToken(a0, tenant, 'kid-probe')).token).header.kid

  const a1 = await node(t, deployment, OLD, NEW)
  await interoperate(t, a1, b0, tenant, 'phase 1 on a, b not yet')
  const b1 = await node(t, deployment, OLD, NEW)
  await interoperate(t, a1, b1, tenant, 'phase 1 everywhere')
  t.equal(decodeToken((await issueToken(b1, tenant, 'kid-probe')).token).header.kid, oldKid, 'phase 1: the old key still signs')

  const a2 = await node(t, deployment, NEW, OLD)
  t.not(decodeToken((await issueToken(a2, tenant, 'kid-probe')).token).header.kid, oldKid, 'phase 2: the new key signs')
  await interoperate(t, a2, b1, tenant, 'phase 2 on a, b still in phase 1')
  const b2 = await node(t, deployment, NEW, OLD)
  await interoperate(t, a2, b2, tenant, 'phase 2 everywhere')
})

t.test('the one-step mistake: a node that lacks the new key refuses its tokens, and says so to revoke-token', async (t) => {
  const deployment: Deployment = { db: await sharedDb(t), bus: createMemoryBus() }
  const stale = await node(t, deployment, OLD)
  const rotated = await node(t, deployment, NEW, OLD)
  const tenant = await createTenant(stale, 'one-step co')
  const issued = await issueToken(rotated, tenant, 'carol')
  t.equal((await verify(rotated, issued.token)).statusCode, 200, 'valid on the node that signed it')
  const refused = await verify(stale, issued.token)
  t.equal(refused.statusCode, 401)
  t.equal(refused.json().code, 'INVALID_TOKEN', 'refused by the node that does not know the new key: why a rotation takes two phases')

  const revoked = await revokeToken(stale, tenant, issued.token)
  t.equal(revoked.statusCode, 400)
  t.strictSame(revoked.json(), UNKNOWN_KEY, 'revoke-token there says the key is unknown to this node, not that the token is not ours')
  t.equal((await verify(rotated, issued.token)).statusCode, 200, 'and nothing was revoked: it is not a revocation it could check')
  t.equal((await revokeToken(rotated, tenant, issued.token)).statusCode, 200, 'a node that knows the key revokes it')
  t.equal((await verify(rotated, issued.token)).json().code, 'TOKEN_REVOKED')

  const foreignKid = decodeToken(issued.token)
  const madeUp = `${Buffer.from(JSON.stringify({ ...foreignKid.header, kid: 'no-such-kid' })).toString('base64url')}.${issued.token.split('.')[1]}.${issued.token.split('.')[2]}`
  t.strictSame((await revokeToken(rotated, tenant, madeUp)).json(), UNKNOWN_KEY, 'any kid this node does not know answers the same, whoever made it up')
})
