import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { ADMIN_TOKEN, type Teardown, createTenant, freshPostgresDatabase, issueToken, startApp, STORE, verify } from './support/helpers.js'
import { startNodeProcess } from './support/node-process.js'

/** A store that outlives the node: a folder for PGlite, a database for PostgreSQL. */
async function durableStore(t: Teardown): Promise<Record<string, string>> {
  if (STORE === 'postgres') return { DATABASE_URL: await freshPostgresDatabase(t) }
  const dir = await mkdtemp(join(tmpdir(), 'chat-auth-test-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return { DATA_DIR: dir }
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
  const env = { ...store, ADMIN_TOKEN, JWT_SECRET: 'persistence-test-secret-of-at-least-32-bytes' }
  const node = await startNodeProcess(env, t.teardown.bind(t))
  const call = async (base: string, method: string, path: string, body?: unknown, admin = false) => {
    const response = await fetch(base + path, {
      method,
      headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...(admin ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    })
    return { status: response.status, body: (await response.json()) as any }
  }
  const company = (await call(node.url, 'POST', '/admin/v1/companies', { name: 'Durable' }, true)).body
  await call(node.url, 'POST', `/admin/v1/companies/${company.id}/agents`, { name: 'agent' }, true)
  const key = (await call(node.url, 'POST', `/admin/v1/companies/${company.id}/api-keys`, {}, true)).body
  const issued = (await call(node.url, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: 'crash-me' })).body
  let acknowledged = 0
  for (let i = 0; i < 5; i++) {
    const result = await call(node.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: issued.user.id })
    t.equal(result.status, 200)
    acknowledged = result.body.newTokenVersion
  }
  await node.kill9()

  const restarted = await startNodeProcess(env, t.teardown.bind(t))
  const user = await call(restarted.url, 'GET', `/admin/v1/customer-users/${issued.user.id}`, undefined, true)
  t.equal(user.status, 200)
  t.equal(user.body.tokenVersion, acknowledged, 'the acknowledged version survived kill -9')
  const old = await fetch(`${restarted.url}/rest/v1/auth/verify`, { headers: { authorization: `Bearer ${issued.token}` } })
  t.equal(old.status, 401, 'the token revoked before the crash stays revoked')
  t.equal(((await old.json()) as any).message, 'Token has been revoked')
  await restarted.stop()
})
