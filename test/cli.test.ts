import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import t from 'tap'
import { adminCall } from '../src/admin-calls.js'
import { ADMIN_TOKEN, storeEnv, storeIndependentTest } from './support/helpers.js'
import { freePort } from './support/ports.js'
import { CLI, startGatewayProcess } from './support/processes.js'

const run = promisify(execFile)

storeIndependentTest('every admin subcommand maps to its call of the client', async (t) => {
  t.same(adminCall('companies', 'create', undefined, { name: 'A' }), { call: 'createCompany', args: [{ name: 'A' }] })
  t.same(adminCall('companies', 'update', 'c1', { 'default-agent-id': 'a1' }), { call: 'updateCompany', args: ['c1', { defaultAgentId: 'a1' }] })
  t.same(adminCall('companies', 'revoke-tokens', 'c1', {}), { call: 'revokeCompanyTokens', args: ['c1'] })
  t.same(adminCall('agents', 'create', 'c1', { name: 'Bot', inactive: true }), { call: 'createAgent', args: ['c1', { name: 'Bot', active: false }] })
  t.same(adminCall('agents', 'update', 'a1', { active: 'false' }), { call: 'updateAgent', args: ['a1', { active: false }] })
  t.same(adminCall('agents', 'revoke-tokens', 'a1', {}), { call: 'revokeAgentTokens', args: ['a1'] })
  t.same(adminCall('api-keys', 'list', 'c1', {}), { call: 'listApiKeys', args: ['c1'] })
  t.same(adminCall('api-keys', 'revoke', 'ak_1', {}), { call: 'revokeApiKey', args: ['ak_1'] })
  t.same(adminCall('users', 'update', 'u1', { active: 'true' }), { call: 'updateCustomerUser', args: ['u1', { active: true }] })
  t.same(adminCall('events', 'list', 'c1', {}), { call: 'listEvents', args: ['c1', {}] })
  t.same(adminCall('events', 'list', 'c1', { limit: '20', before: 'cursor' }), { call: 'listEvents', args: ['c1', { limit: 20, before: 'cursor' }] })
  t.throws(() => adminCall('events', 'list', 'c1', { limit: 'ten' }), /--limit/)
  t.throws(() => adminCall('companies', 'revoke-tokens', undefined, {}), /needs a company id/)
  t.throws(() => adminCall('users', 'update', 'u1', {}), /--active/)
  t.throws(() => adminCall('companies', 'create', undefined, {}), /--name/)
  t.throws(() => adminCall('nothing', 'here', undefined, {}), /unknown command/)
  t.throws(() => adminCall('companies', '', undefined, {}), /needs an action/)
})

t.test('the CLI drives a running node: migrate, then admin calls end to end', async (t) => {
  const store = await storeEnv(t)
  if (store.DATA_DIR === 'memory://') store.DATA_DIR = t.testdir()
  const env = { ...store, ADMIN_TOKEN, JWT_SECRET: 'cli-test-secret-with-at-least-32-bytes!!', PATH: process.env.PATH ?? '' }
  const migrated = await run(process.execPath, [CLI, 'migrate'], { env })
  t.match(migrated.stdout, /applied: 001_schema\.sql|schema is up to date/)
  t.match((await run(process.execPath, [CLI, 'migrate'], { env })).stdout, /schema is up to date/, 'migrate is idempotent')

  const node = await startGatewayProcess(env, { teardown: t.teardown.bind(t) })
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
  t.equal((await cli('companies', 'revoke-tokens', company.id)).companyId, company.id)
  t.equal((await cli('agents', 'revoke-tokens', agent.id)).agentId, agent.id)
  t.equal((await cli('agents', 'update', agent.id, '--active', 'false')).active, false)
  t.ok((await cli('api-keys', 'revoke', key.keyId)).revokedAt)
  const events = await cli('events', 'list', company.id, '--limit', '2')
  t.same(events.events.map((e: { type: string }) => e.type), ['api_key.revoked', 'agent.deactivated'], 'newest first, two of them')
  const older = await cli('events', 'list', company.id, '--limit', '500', '--before', events.next)
  t.same(older.events.map((e: { type: string }) => e.type), ['agent.tokens_revoked', 'company.tokens_revoked', 'api_key.created'], 'the next page from the cursor')
  t.equal(older.next, null)

  const failed = await run(process.execPath, [CLI, 'companies', 'get', company.id, '--url', node.url, '--admin-token', 'wrong-token-0123456789'], { env }).catch((e) => e)
  t.equal(failed.code, 1)
  t.same(JSON.parse(failed.stderr), { statusCode: 401, code: 'INVALID_ADMIN_TOKEN', message: 'Invalid admin token' }, 'the error body on stderr')
  const missing = await run(process.execPath, [CLI, 'agents', 'revoke-tokens', company.id, '--url', node.url], { env }).catch((e) => e)
  t.equal(missing.code, 1)
  t.match(JSON.parse(missing.stderr), { statusCode: 404, code: 'NOT_FOUND', message: 'Agent not found' })
})

storeIndependentTest('the CLI as a newcomer meets it', async (t) => {
  const env = { PATH: process.env.PATH ?? '', ADMIN_TOKEN }
  const cli = (args: string[], extra: Record<string, string> = {}) =>
    run(process.execPath, [CLI, ...args], { env: { ...env, ...extra } }).then(
      (done) => ({ code: 0, stdout: done.stdout, stderr: done.stderr }),
      (failed: { code: number; stdout: string; stderr: string }) => ({ code: failed.code, stdout: failed.stdout, stderr: failed.stderr }),
    )

  // No node listens on this port: the error names the URL tried and how to point elsewhere.
  const port = await freePort()
  const unreachable = await cli(['companies', 'create', '--name', 'Acme'], { PORT: String(port) })
  t.equal(unreachable.code, 1)
  t.match(unreachable.stderr, `http://127.0.0.1:${port}`, 'says which URL it tried')
  t.match(unreachable.stderr, /--url/, 'says how to point it elsewhere')
  t.match(unreachable.stderr, /CHAT_AUTH_URL/)
  const viaEnv = await cli(['companies', 'get', 'c1'], { CHAT_AUTH_URL: `http://127.0.0.1:${port}/` })
  t.match(viaEnv.stderr, `http://127.0.0.1:${port}/`, 'CHAT_AUTH_URL is the URL tried')

  // A resource without its action: the usage of that group, not "unknown command".
  const group = await cli(['companies'])
  t.equal(group.code, 2)
  t.notMatch(group.stderr, /unknown command/)
  t.match(group.stderr, /chat-auth companies create --name NAME/)
  t.match(group.stderr, /chat-auth companies get COMPANY_ID/)
  t.notMatch(group.stderr, /chat-auth agents create/, 'only that group')
  const unknown = await cli(['companies', 'delete', 'c1'])
  t.equal(unknown.code, 2)
  t.match(unknown.stderr, /companies has no action "delete"/)
  t.match(unknown.stderr, /chat-auth companies update COMPANY_ID/)
  t.match((await cli(['nothing'])).stderr, /unknown command: nothing/)

  const version = await cli(['--version'])
  t.equal(version.code, 0)
  t.equal(version.stdout.trim(), JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version)

  const help = await cli(['--help'])
  t.equal(help.code, 0)
  for (const variable of ['CHAT_AUTH_URL', 'ADMIN_TOKEN', 'PORT', 'HOST', 'DATABASE_URL', 'REDIS_URL', 'DATA_DIR', 'JWT_SECRET']) {
    t.match(help.stdout, new RegExp(`\\b${variable}\\b`), `--help lists ${variable}`)
  }
  t.notMatch(help.stdout, /UNSAFE/, 'but not the chaos-test switch')
  t.match(help.stdout, /--version/)
})
