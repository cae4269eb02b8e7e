import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { adminCall } from '../src/admin-calls.js'
import { ADMIN_TOKEN, storeEnv } from './support/helpers.js'
import { startNodeProcess } from './support/node-process.js'

const CLI = fileURLToPath(new URL('../dist/src/cli.js', import.meta.url))
const run = promisify(execFile)

t.test('every admin subcommand maps to its SPEC §4 call', async (t) => {
  t.same(adminCall('companies', 'create', undefined, { name: 'A' }), { method: 'POST', path: '/admin/v1/companies', body: { name: 'A' } })
  t.same(adminCall('companies', 'update', 'c1', { 'default-agent-id': 'a1' }), { method: 'PATCH', path: '/admin/v1/companies/c1', body: { defaultAgentId: 'a1' } })
  t.same(adminCall('agents', 'create', 'c1', { name: 'Bot', inactive: true }), { method: 'POST', path: '/admin/v1/companies/c1/agents', body: { name: 'Bot', active: false } })
  t.same(adminCall('agents', 'update', 'a1', { active: 'false' }), { method: 'PATCH', path: '/admin/v1/agents/a1', body: { active: false } })
  t.same(adminCall('api-keys', 'list', 'c1', {}), { method: 'GET', path: '/admin/v1/companies/c1/api-keys' })
  t.same(adminCall('api-keys', 'revoke', 'ak_1', {}), { method: 'DELETE', path: '/admin/v1/api-keys/ak_1' })
  t.same(adminCall('users', 'update', 'u1', { active: 'true' }), { method: 'PATCH', path: '/admin/v1/customer-users/u1', body: { active: true } })
  t.throws(() => adminCall('users', 'update', 'u1', {}), /--active/)
  t.throws(() => adminCall('companies', 'create', undefined, {}), /--name/)
  t.throws(() => adminCall('nothing', 'here', undefined, {}), /unknown command/)
})

t.test('the CLI drives a running node: migrate, then admin calls end to end', async (t) => {
  const store = await storeEnv(t)
  if (store.DATA_DIR === 'memory://') store.DATA_DIR = t.testdir()
  const env = { ...store, ADMIN_TOKEN, JWT_SECRET: 'cli-test-secret-with-at-least-32-bytes!!', PATH: process.env.PATH ?? '' }
  const migrated = await run(process.execPath, [CLI, 'migrate'], { env })
  t.match(migrated.stdout, /applied: 001_schema\.sql|schema is up to date/)
  t.match((await run(process.execPath, [CLI, 'migrate'], { env })).stdout, /schema is up to date/, 'migrate is idempotent')

  const node = await startNodeProcess(env, t.teardown.bind(t))
  const cli = async (...args: string[]) => JSON.parse((await run(process.execPath, [CLI, ...args, '--url', node.url], { env })).stdout)
  const company = await cli('companies', 'create', '--name', 'CLI Co')
  t.equal(company.name, 'CLI Co')
  const agent = await cli('agents', 'create', company.id, '--name', 'CLI Agent')
  t.equal((await cli('companies', 'get', company.id)).defaultAgentId, agent.id)
  const key = await cli('api-keys', 'create', company.id, '--name', 'cli key')
  t.match(key.keySecret, /^sk_/)
  const listed = await cli('api-keys', 'list', company.id)
  t.equal(listed.length, 1)
  t.notOk(JSON.stringify(listed).includes(key.keySecret), 'the secret is never listed')
  t.equal((await cli('agents', 'update', agent.id, '--active', 'false')).active, false)
  t.ok((await cli('api-keys', 'revoke', key.keyId)).revokedAt)

  const failed = await run(process.execPath, [CLI, 'companies', 'get', company.id, '--url', node.url, '--admin-token', 'wrong-token-0123456789'], { env }).catch((e) => e)
  t.equal(failed.code, 1)
  t.match(failed.stderr, /Invalid admin token/)
})
