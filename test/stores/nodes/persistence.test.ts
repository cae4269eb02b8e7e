import t from 'tap'
import { type Teardown, createTenant, freshPostgresDatabase, issueToken, startApp, STORE, verify } from '../../support/helpers.js'
import { admin, call, verify as verifyOverHttp } from '../../support/http-client.js'
import { migratedDataDir } from '../../support/pglite-data-dir.js'
import { startGatewayProcess } from '../../support/processes.js'

/**
 * A store that outlives the node: a folder for PGlite (migrated already: what the tests
 * restart is the node, not the store's first start), a database for PostgreSQL.
 */
async function durableStore(t: Teardown): Promise<Record<string, string>> {
  if (STORE === 'postgres') return { DATABASE_URL: await freshPostgresDatabase(t) }
  return { DATA_DIR: await migratedDataDir(t) }
}

t.test('tokens signed with the generated key still verify after a restart', async (t) => {
  const store = await durableStore(t)
  // No JWT_SECRET: the key is generated on first start and kept in the store.
  const first = await startApp(t, { ...store, JWT_SECRET: '' })
  const tenant = await createTenant(first)
  const issued = await issueToken(first, tenant, 'persist-me')
  t.equal((await verify(first, issued.token)).statusCode, 200)
  await first.app.close()

  const second = await startApp(t, { ...store, JWT_SECRET: '' })
  const after = await verify(second, issued.token)
  t.equal(after.statusCode, 200, 'the token issued before the restart verifies after it')
  t.equal(after.json().user.id, issued.user.id)
  t.equal(first.gateway.keyring.signingKid, second.gateway.keyring.signingKid, 'the same kid signs')
})

t.test('a version acknowledged before kill -9 is there after the restart', async (t) => {
  const store = await durableStore(t)
  const env = { ...store, JWT_SECRET: 'persistence-test-secret-of-at-least-32-bytes' }
  const node = await startGatewayProcess(env, { teardown: t.teardown.bind(t) })
  const company = (await admin(node.url, 'POST', '/admin/v1/companies', { name: 'Durable' })).body
  await admin(node.url, 'POST', `/admin/v1/companies/${company.id}/agents`, { name: 'agent' })
  const key = (await admin(node.url, 'POST', `/admin/v1/companies/${company.id}/api-keys`, {})).body
  const issued = (await call(node.url, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: 'crash-me' })).body
  let acknowledged = 0
  for (let i = 0; i < 5; i++) {
    const result = await call(node.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.user.id })
    t.equal(result.status, 200)
    acknowledged = result.body.newTokenVersion
  }
  await node.kill9()

  const restarted = await startGatewayProcess(env, { teardown: t.teardown.bind(t) })
  const user = await admin(restarted.url, 'GET', `/admin/v1/customer-users/${issued.user.id}`)
  t.equal(user.status, 200)
  t.equal(user.body.tokenVersion, acknowledged, 'the acknowledged version survived kill -9')
  const old = await verifyOverHttp(restarted.url, issued.token)
  t.equal(old.status, 401, 'the token revoked before the crash stays revoked')
  t.equal(old.body.message, 'Token has been revoked')
  await restarted.stop()
})
