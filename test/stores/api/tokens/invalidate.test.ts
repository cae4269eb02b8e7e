/**
 * SPEC §3.2 POST /rest/v1/auth/invalidate-token, black box: the answer, the effect on
 * verification, the refusals (which change nothing), and concurrent increments.
 */
import t from 'tap'
import {
  createTenant,
  decodeToken,
  invalidate,
  issueToken,
  leakedLogLines,
  randomUUID,
  serverErrorCounts,
  snapshotRows,
  startApp,
  verify,
  type Tenant,
} from '../../../support/helpers.js'
import { CUSTOMER_USER_NOT_FOUND as USER_NOT_FOUND, INVALID_API_CREDENTIALS as INVALID_CREDENTIALS, TOKEN_REVOKED as REVOKED } from '../../../support/spec-bodies.js'


const node = await startApp(t)
const tenant = (name = 'Acme'): Promise<Tenant> => createTenant(node, name)

async function tokenVersionOf(id: string): Promise<number> {
  const response = await node.admin('GET', `/admin/v1/customer-users/${id}`)
  if (response.statusCode !== 200) throw new Error(`admin GET customer-user: ${response.statusCode} ${response.body}`)
  return response.json().tokenVersion
}

t.test('invalidation answers 200 with the new version, revokes older tokens, and newer tokens verify', async (t) => {
  const acme = await tenant()
  const old = await issueToken(node, acme, 'user-1')
  const older = await issueToken(node, acme, 'user-1')
  t.equal((await verify(node, old.token)).statusCode, 200, 'control: the token verifies before')

  const response = await invalidate(node, acme, old.user.id)
  t.equal(response.statusCode, 200)
  t.match(response.headers['content-type'], /^application\/json/)
  t.strictSame(response.json(), { message: 'All tokens invalidated successfully', customerUserId: old.user.id, newTokenVersion: 1 })
  t.equal(await tokenVersionOf(old.user.id), 1)

  for (const token of [old.token, older.token]) {
    const refused = await verify(node, token)
    t.equal(refused.statusCode, 401)
    t.strictSame(refused.json(), REVOKED)
    t.equal(refused.headers['www-authenticate'], 'Bearer error="invalid_token"')
  }

  const fresh = await issueToken(node, acme, 'user-1')
  t.equal(fresh.user.id, old.user.id, 'the same user')
  t.equal(decodeToken(fresh.token).payload.tokenVersion, 1)
  const accepted = await verify(node, fresh.token)
  t.equal(accepted.statusCode, 200)
  t.equal(accepted.json().tokenVersion, 1)

  const second = await invalidate(node, acme, old.user.id)
  t.strictSame(second.json(), { message: 'All tokens invalidated successfully', customerUserId: old.user.id, newTokenVersion: 2 })
  t.strictSame((await verify(node, fresh.token)).json(), REVOKED, 'the version-1 token is revoked in turn')
  t.equal(await tokenVersionOf(old.user.id), 2)
})

t.test('invalidating one user leaves the other users of the company alone', async (t) => {
  const acme = await tenant()
  const target = await issueToken(node, acme, 'target')
  const bystander = await issueToken(node, acme, 'bystander')
  t.equal((await invalidate(node, acme, target.user.id)).statusCode, 200)
  t.equal((await verify(node, bystander.token)).statusCode, 200)
  t.equal(await tokenVersionOf(bystander.user.id), 0)
})

t.test('an unknown, malformed or foreign customerUserId is a 400, and nothing changes', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const own = await issueToken(node, acme, 'own-user')
  const foreign = await issueToken(node, other, 'foreign-user')
  const rows = await snapshotRows(node)
  const cases: Array<[string, string]> = [
    ['an unknown uuid', randomUUID()],
    ['not a uuid', 'user-1'],
    ['the external id instead of the id', 'own-user'],
    ['a uuid with a trailing character', `${own.user.id}0`],
    ['a uuid without dashes', own.user.id.replaceAll('-', '')],
    ['a user of another company', foreign.user.id],
  ]
  for (const [label, customerUserId] of cases) {
    const response = await invalidate(node, acme, customerUserId)
    t.equal(response.statusCode, 400, label)
    t.strictSame(response.json(), USER_NOT_FOUND, label)
  }
  t.equal(await snapshotRows(node), rows, 'no row changed')
  t.equal(await tokenVersionOf(foreign.user.id), 0, 'the other company\'s user keeps its version')
  t.equal((await verify(node, foreign.token)).statusCode, 200, 'and its token still verifies')
  t.equal((await verify(node, own.token)).statusCode, 200)
})

t.test('the customerUserId in upper case names the same user and revokes its tokens', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'upper-user')
  const response = await invalidate(node, acme, issued.user.id.toUpperCase())
  t.equal(response.statusCode, 200)
  t.strictSame(response.json(), { message: 'All tokens invalidated successfully', customerUserId: issued.user.id, newTokenVersion: 1 })
  t.strictSame((await verify(node, issued.token)).json(), REVOKED)
})

t.test('bad credentials answer 401 before the user is looked at, and nothing changes', async (t) => {
  const acme = await tenant()
  const other = await tenant('Other')
  const issued = await issueToken(node, acme, 'user-2')
  const revoked = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/api-keys`, { name: 'to revoke' })).json()
  t.equal((await node.admin('DELETE', `/admin/v1/api-keys/${revoked.keyId}`)).statusCode, 200)
  const rows = await snapshotRows(node)

  const cases: Array<[string, { keyId: string; keySecret: string }]> = [
    ['unknown keyId', { keyId: 'ak_unknown', keySecret: acme.keySecret }],
    ['wrong secret', { keyId: acme.keyId, keySecret: 'sk_wrong' }],
    ['another key\'s secret', { keyId: acme.keyId, keySecret: other.keySecret }],
    ['revoked key', { keyId: revoked.keyId, keySecret: revoked.keySecret }],
  ]
  for (const [label, credentials] of cases) {
    for (const customerUserId of [issued.user.id, randomUUID(), 'not-a-uuid']) {
      const response = await invalidate(node, credentials, customerUserId)
      t.equal(response.statusCode, 401, `${label}, ${customerUserId}`)
      t.strictSame(response.json(), INVALID_CREDENTIALS, `${label}, ${customerUserId}`)
    }
  }
  t.equal(await snapshotRows(node), rows, 'no row changed')
  t.equal((await verify(node, issued.token)).statusCode, 200)
})

t.test('an inactive user can be invalidated: its version goes up all the same', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'inactive-user')
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: false })).statusCode, 200)
  const response = await invalidate(node, acme, issued.user.id)
  t.equal(response.statusCode, 200)
  t.strictSame(response.json(), { message: 'All tokens invalidated successfully', customerUserId: issued.user.id, newTokenVersion: 1 })
  t.equal((await node.admin('PATCH', `/admin/v1/customer-users/${issued.user.id}`, { active: true })).statusCode, 200)
  t.strictSame((await verify(node, issued.token)).json(), REVOKED, 'reactivated, the old token stays revoked')
})

t.test('40 concurrent invalidations of one user lose no increment', async (t) => {
  const acme = await tenant()
  const issued = await issueToken(node, acme, 'racer')
  const responses = await Promise.all(Array.from({ length: 40 }, () => invalidate(node, acme, issued.user.id)))
  t.strictSame(
    responses.map((r) => r.statusCode),
    Array(40).fill(200),
  )
  const versions = responses.map((r) => r.json().newTokenVersion as number).sort((a, b) => a - b)
  t.strictSame(
    versions,
    Array.from({ length: 40 }, (_, i) => i + 1),
    'each call got its own version, 1..40',
  )
  t.equal(await tokenVersionOf(issued.user.id), 40)
  t.strictSame((await verify(node, issued.token)).json(), REVOKED)
  const fresh = await issueToken(node, acme, 'racer')
  t.equal(decodeToken(fresh.token).payload.tokenVersion, 40)
  t.equal((await verify(node, fresh.token)).statusCode, 200)
})

t.test('no request answered 5xx, and no secret or JWT reached the log', async (t) => {
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs), [])
})
