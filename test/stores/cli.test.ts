import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { promisify } from 'node:util'
import t from 'tap'
import { adminCall, howToCheckWrite } from '../../src/admin-calls.js'
import { oauthCall } from '../../src/oauth-calls.js'
import { ADMIN_TOKEN, freshPostgresDatabase, JWT_SECRET, startApp, storeEnv, storeIndependentTest } from '../support/helpers.js'
import { migratedDataDir } from '../support/pglite-data-dir.js'
import { waitFor } from '../support/poll.js'
import { freePort } from '../support/ports.js'
import { CLI, spawnProcess, startGatewayProcess } from '../support/processes.js'
import { startRedis } from '../support/services.js'
import { startTcpProxy } from '../support/tcp-proxy.js'
import { answerJson, hostileServer, redirectTo, writeBytes, type HostileServer } from '../support/hostile-http.js'

const run = promisify(execFile)

// About forty CLI processes and a node, each a Node start: 106 s and 120.5 s (past the suite's
// 120 s) in one run of both store passes on a loaded two-core machine.
t.setTimeout(300_000)

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
  t.same(adminCall('webhooks', 'create', 'c1', { endpoint: 'https://h.example/' }), { call: 'createWebhook', args: ['c1', { url: 'https://h.example/' }] })
  t.same(adminCall('webhooks', 'create', 'c1', { endpoint: 'https://h.example/', types: 'token.revoked,user.deactivated' }), {
    call: 'createWebhook',
    args: ['c1', { url: 'https://h.example/', types: ['token.revoked', 'user.deactivated'] }],
  })
  t.throws(() => adminCall('webhooks', 'create', 'c1', {}), /--endpoint/)
  t.same(adminCall('webhooks', 'list', 'c1', {}), { call: 'listWebhooks', args: ['c1'] })
  t.same(adminCall('webhooks', 'delete', 'w1', {}), { call: 'deleteWebhook', args: ['w1'] })
  t.same(adminCall('webhooks', 'deliveries', 'w1', { limit: '5' }), { call: 'listWebhookDeliveries', args: ['w1', { limit: 5 }] })
  t.throws(() => adminCall('companies', 'revoke-tokens', undefined, {}), /needs a company id/)
  t.throws(() => adminCall('users', 'update', 'u1', {}), /--active/)
  t.throws(() => adminCall('companies', 'create', undefined, {}), /--name/)
  t.throws(() => adminCall('nothing', 'here', undefined, {}), /unknown command/)
  t.throws(() => adminCall('companies', '', undefined, {}), /needs an action/)
})

storeIndependentTest('the subcommands of SPEC §10: operators, and the calls the console makes', async (t) => {
  t.same(adminCall('operators', 'create', undefined, { name: 'Dana', role: 'viewer' }), { call: 'createOperator', args: [{ name: 'Dana', role: 'viewer' }] })
  t.same(adminCall('operators', 'list', undefined, {}), { call: 'listOperators', args: [] })
  t.same(adminCall('operators', 'revoke', 'o1', {}), { call: 'revokeOperator', args: ['o1'] })
  t.throws(() => adminCall('operators', 'create', undefined, { name: 'Dana' }), /--role/)
  t.throws(() => adminCall('operators', 'create', undefined, { name: 'Dana', role: 'root' }), /--role takes viewer, operator or admin/)
  t.throws(() => adminCall('operators', 'create', undefined, { role: 'viewer' }), /--name/)
  t.same(adminCall('users', 'find', undefined, { 'company-id': 'c1', 'external-id': 'e1' }), { call: 'findCustomerUser', args: ['c1', 'e1'] })
  t.throws(() => adminCall('users', 'find', undefined, { 'company-id': 'c1' }), /--external-id/)
  t.same(adminCall('users', 'invalidate', 'u1', {}), { call: 'invalidateUser', args: ['u1'] })
  t.same(adminCall('tokens', 'revoke', 'eyJ.a.b', {}), { call: 'revokeToken', args: ['eyJ.a.b'] })
  t.same(adminCall('companies', 'search', undefined, { query: 'ac', limit: '5', after: 'cur' }), { call: 'searchCompanies', args: [{ query: 'ac', limit: 5, after: 'cur' }] })
  t.same(adminCall('companies', 'preview-revoke', 'c1', {}), { call: 'previewCompanyRevocation', args: ['c1'] })
  t.same(adminCall('agents', 'preview-revoke', 'a1', {}), { call: 'previewAgentRevocation', args: ['a1'] })
  t.same(adminCall('nodes', 'list', undefined, {}), { call: 'listNodes', args: [] })
  t.same(adminCall('webhooks', 'redeliver', '17', {}), { call: 'redeliver', args: ['17'] })
  const writes = {
    'operators create': [undefined, { name: 'Dana', role: 'viewer' }, /operators list.*"Dana"/],
    'operators revoke': ['o1', {}, /harmless/],
    'users invalidate': ['u1', {}, /chat-auth users get u1.*tokenVersion/],
    'tokens revoke': ['eyJ.a.b', {}, /harmless/],
    'webhooks redeliver': ['17', {}, /webhooks deliveries.*queue another/],
  } as const
  for (const [command, [id, flags, check]] of Object.entries(writes)) {
    const [group, action] = command.split(' ') as [string, string]
    t.match(howToCheckWrite(adminCall(group, action, id, flags)), check, command)
  }
  for (const [group, action, id, flags] of [['operators', 'list', undefined, {}], ['nodes', 'list', undefined, {}], ['companies', 'search', undefined, {}], ['companies', 'preview-revoke', 'c1', {}]] as const) {
    t.equal(howToCheckWrite(adminCall(group, action, id, flags)), undefined, `${group} ${action} is a read`)
  }
})

storeIndependentTest('the oauth subcommands: introspect and revoke, the token as an argument or on stdin', async (t) => {
  const stdin = async () => '  eyJ.token.from-stdin\n'
  t.same(await oauthCall('introspect', 'eyJ.a.b', stdin), { call: 'introspect', token: 'eyJ.a.b' })
  t.same(await oauthCall('revoke', '-', stdin), { call: 'revoke', token: 'eyJ.token.from-stdin' })
  await t.rejects(oauthCall('revoke', undefined, stdin), /needs a token/)
  await t.rejects(oauthCall('inspect', 'x', stdin), /oauth has no action "inspect"/)
  await t.rejects(oauthCall('', 'x', stdin), /needs an action: introspect, revoke/)
  await t.rejects(oauthCall('introspect', '-', async () => '\n'), /no token on stdin/)
})

storeIndependentTest('every write says how to check whether it was applied; reads say nothing', async (t) => {
  const writes = {
    'companies create': [undefined, { name: 'Acme' }, /company named "Acme"/],
    'companies update': ['c1', { name: 'B' }, /chat-auth companies get c1.*harmless/],
    'companies revoke-tokens': ['c1', {}, /chat-auth events list c1.*company\.tokens_revoked/],
    'agents create': ['c1', { name: 'Bot' }, /second agent/],
    'agents update': ['a1', { active: 'false' }, /agent\.deactivated.*harmless/],
    'agents revoke-tokens': ['a1', {}, /agent\.tokens_revoked event of agent a1/],
    'api-keys create': ['c1', {}, /chat-auth api-keys list c1/],
    'api-keys revoke': ['ak_1', {}, /harmless/],
    'users update': ['u1', { active: 'true' }, /chat-auth users get u1.*harmless/],
    'webhooks create': ['c1', { endpoint: 'https://h.example/' }, /chat-auth webhooks list c1/],
    'webhooks delete': ['w1', {}, /once w1 is not there/],
  } as const
  for (const [command, [id, flags, check]] of Object.entries(writes)) {
    const [group, action] = command.split(' ') as [string, string]
    t.match(howToCheckWrite(adminCall(group, action, id, flags)), check, command)
  }
  for (const [group, action] of [['companies', 'get'], ['api-keys', 'list'], ['users', 'get'], ['events', 'list'], ['webhooks', 'list'], ['webhooks', 'deliveries']] as const) {
    t.equal(howToCheckWrite(adminCall(group, action, 'x1', {})), undefined, `${group} ${action} is a read`)
  }
})

storeIndependentTest('a connection cut after the call was sent: a write may have been applied, a read just failed', async (t) => {
  const server = createServer((request) => request.socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const cli = (...args: string[]) => run(process.execPath, [CLI, ...args, '--url', url], { env: { PATH: process.env.PATH ?? '', ADMIN_TOKEN } }).then(
      () => ({ code: 0, stderr: '' }),
      (failed: { code: number; stderr: string }) => failed,
    )
  const write = await cli('companies', 'revoke-tokens', 'c1')
  t.equal(write.code, 1)
  t.match(write.stderr, /could not reach a chat-auth node/)
  t.match(write.stderr, /may have been applied/)
  t.match(write.stderr, 'chat-auth events list c1')
  const read = await cli('companies', 'get', 'c1')
  t.equal(read.code, 1)
  t.match(read.stderr, /could not reach a chat-auth node/)
  t.notMatch(read.stderr, /may have been applied/, 'a read changes nothing')
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

  // SPEC §9 as an OAuth client: the key from the environment, the token as an argument or on stdin.
  const issued = await fetch(`${node.url}/rest/v1/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keyId: key.keyId, keySecret: key.keySecret, userId: 'cli-user' }) })
  const { token, user } = (await issued.json()) as { token: string; user: { id: string } }
  const keyEnv = { ...env, CHAT_AUTH_KEY_ID: key.keyId, CHAT_AUTH_KEY_SECRET: key.keySecret }
  const oauthCli = (args: string[], extra: Record<string, string> = {}, stdin?: string) => {
    const pending = run(process.execPath, [CLI, 'oauth', ...args, '--url', node.url], { env: { ...keyEnv, ...extra } })
    pending.child.stdin?.end(stdin ?? '')
    return pending.then(
      (done) => ({ code: 0, stdout: done.stdout, stderr: done.stderr }),
      (failed: { code: number; stdout: string; stderr: string }) => ({ code: failed.code, stdout: failed.stdout, stderr: failed.stderr }),
    )
  }
  const introspected = await oauthCli(['introspect', token])
  t.equal(introspected.code, 0)
  t.match(JSON.parse(introspected.stdout), { active: true, sub: user.id, client_id: key.keyId, company_id: company.id, agent_id: agent.id, ext_id: 'cli-user', token_type: 'Bearer' })
  const wrongKey = await oauthCli(['introspect', token], { CHAT_AUTH_KEY_SECRET: 'sk_wrong' })
  t.equal(wrongKey.code, 1)
  t.same(JSON.parse(wrongKey.stderr), { statusCode: 401, code: 'invalid_client', message: 'invalid_client' }, 'the refusal on stderr')
  const revokedByCli = await oauthCli(['revoke', '-'], {}, token + '\n')
  t.same([revokedByCli.code, revokedByCli.stdout], [0, ''], 'revoke, the token read from stdin: prints nothing')
  t.same(JSON.parse((await oauthCli(['introspect', '-'], {}, token)).stdout), { active: false }, 'inactive once revoked')
  t.equal((await fetch(`${node.url}/rest/v1/auth/verify`, { headers: { authorization: `Bearer ${token}` } })).status, 401, 'refused by verify')
  const noSecret = await oauthCli(['introspect', token], { CHAT_AUTH_KEY_SECRET: '' })
  t.equal(noSecret.code, 2)
  t.match(noSecret.stderr, /set CHAT_AUTH_KEY_SECRET/)
  t.match(noSecret.stderr, /chat-auth oauth introspect TOKEN\|-/, 'with the usage of the oauth calls')

  t.equal((await cli('companies', 'revoke-tokens', company.id)).companyId, company.id)
  t.equal((await cli('agents', 'revoke-tokens', agent.id)).agentId, agent.id)
  t.equal((await cli('agents', 'update', agent.id, '--active', 'false')).active, false)
  t.ok((await cli('api-keys', 'revoke', key.keyId)).revokedAt)
  const events = await cli('events', 'list', company.id, '--limit', '2')
  t.same(events.events.map((e: { type: string }) => e.type), ['api_key.revoked', 'agent.deactivated'], 'newest first, two of them')
  const older = await cli('events', 'list', company.id, '--limit', '500', '--before', events.next)
  t.same(older.events.map((e: { type: string }) => e.type), ['agent.tokens_revoked', 'company.tokens_revoked', 'token.revoked', 'api_key.created'], 'the next page from the cursor (the oauth revoke among them)')
  t.equal(older.next, null)

  const hook = await cli('webhooks', 'create', company.id, '--endpoint', 'https://hooks.example.com/chat', '--types', 'token.revoked,user.deactivated')
  t.match(hook, { companyId: company.id, url: 'https://hooks.example.com/chat', types: ['token.revoked', 'user.deactivated'], secret: /^whsec_/ })
  const hooks = await cli('webhooks', 'list', company.id)
  t.same(hooks, [{ id: hook.id, companyId: company.id, url: hook.url, types: hook.types, createdAt: hook.createdAt }], 'listed without its secret')
  t.same(await cli('webhooks', 'deliveries', hook.id, '--limit', '10'), [])
  t.equal((await cli('webhooks', 'delete', hook.id)).id, hook.id)
  t.same(await cli('webhooks', 'list', company.id), [])

  const failed = await run(process.execPath, [CLI, 'companies', 'get', company.id, '--url', node.url, '--admin-token', 'wrong-token-0123456789'], { env }).catch((e) => e)
  t.equal(failed.code, 1)
  t.same(JSON.parse(failed.stderr), { statusCode: 401, code: 'INVALID_ADMIN_TOKEN', message: 'Invalid admin token' }, 'the error body on stderr')
  const missing = await run(process.execPath, [CLI, 'agents', 'revoke-tokens', company.id, '--url', node.url], { env }).catch((e) => e)
  t.equal(missing.code, 1)
  t.match(JSON.parse(missing.stderr), { statusCode: 404, code: 'NOT_FOUND', message: 'Agent not found' })

  // SPEC §10.1: operators; an operator's token works wherever ADMIN_TOKEN does, within its role.
  const operator = await cli('operators', 'create', '--name', 'CLI Op', '--role', 'operator')
  t.match(operator, { name: 'CLI Op', role: 'operator', token: /^opt_/ })
  t.match((await cli('operators', 'list')).find((o: { id: string }) => o.id === operator.id), { name: 'CLI Op', revokedAt: null })
  const asOperator = (args: string[], stdin = '') => {
    const pending = run(process.execPath, [CLI, ...args, '--url', node.url], { env: { ...env, ADMIN_TOKEN: operator.token } })
    pending.child.stdin?.end(stdin)
    return pending.then(
      (done) => ({ code: 0, stdout: done.stdout, stderr: done.stderr }),
      (failed: { code: number; stdout: string; stderr: string }) => ({ code: failed.code, stdout: failed.stdout, stderr: failed.stderr }),
    )
  }
  const found = await asOperator(['users', 'find', '--company-id', company.id, '--external-id', 'cli-user'])
  t.equal(JSON.parse(found.stdout).id, user.id)
  t.equal(JSON.parse((await asOperator(['users', 'invalidate', user.id])).stdout).newTokenVersion, 1)
  const second = await fetch(`${node.url}/rest/v1/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ keyId: key.keyId, keySecret: key.keySecret, userId: 'cli-user' }) })
  t.equal(second.status, 401, 'the key was revoked above')
  t.match(JSON.parse((await asOperator(['companies', 'search', '--query', 'cli'])).stdout), { companies: [{ id: company.id }], next: null })
  t.match(JSON.parse((await asOperator(['companies', 'preview-revoke', company.id])).stdout), { users: 1, openSessions: 0 })
  t.equal(JSON.parse((await asOperator(['nodes', 'list'])).stdout).nodes.length, 1)
  const revokedToken = await asOperator(['tokens', 'revoke', '-'], token + '\n')
  t.equal(revokedToken.code, 0)
  t.match(JSON.parse(revokedToken.stdout), { message: 'Token revoked successfully', receipt: null }, 'revoked by the oauth call above already')
  const forbidden = await asOperator(['companies', 'create', '--name', 'Not Mine'])
  t.equal(forbidden.code, 1)
  t.same(JSON.parse(forbidden.stderr), { statusCode: 403, code: 'FORBIDDEN', message: 'Insufficient role' })
  t.match(await cli('operators', 'revoke', operator.id), { id: operator.id, revokedAt: String })
  const refused = await asOperator(['nodes', 'list'])
  t.equal(refused.code, 1)
  t.same(JSON.parse(refused.stderr), { statusCode: 401, code: 'INVALID_ADMIN_TOKEN', message: 'Invalid admin token' })
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
  t.notMatch(unreachable.stderr, /may have been applied/, 'a refused connection sent nothing: no doubt to raise')
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
  t.equal(version.stdout.trim(), JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version)

  const help = await cli(['--help'])
  t.equal(help.code, 0)
  for (const variable of ['CHAT_AUTH_URL', 'ADMIN_TOKEN', 'PORT', 'HOST', 'DATABASE_URL', 'REDIS_URL', 'DATA_DIR', 'JWT_SECRET', 'JWKS_MAX_AGE', 'OTEL_EXPORTER_OTLP_ENDPOINT']) {
    t.match(help.stdout, new RegExp(`\\b${variable}\\b`), `--help lists ${variable}`)
  }
  t.notMatch(help.stdout, /UNSAFE/, 'but not the chaos-test switch')
  t.match(help.stdout, /--version/)
})

storeIndependentTest('a write that answered 503 may have been applied: the CLI says so, and how to check', async (t) => {
  // One node over PostgreSQL and Redis, its Redis commands through a proxy the test silences:
  // a write commits, its publish cannot be confirmed, and the node answers 503.
  const redis = await startRedis()
  t.teardown(() => redis.stop())
  const proxy = await startTcpProxy(redis.port)
  t.teardown(() => proxy.close())
  const node = await startApp(t, { DATABASE_URL: await freshPostgresDatabase(t), REDIS_URL: `redis://127.0.0.1:${proxy.port}`, CACHE_LEASE_MS: '500' })
  const url = await node.app.listen({ port: 0, host: '127.0.0.1' })
  await waitFor('the node to trust its cache', () => node.gateway.bus.trusted())
  const env = { PATH: process.env.PATH ?? '', ADMIN_TOKEN }
  const cli = (...args: string[]) =>
    run(process.execPath, [CLI, ...args, '--url', url], { env }).then(
      (done) => ({ code: 0, stdout: done.stdout, stderr: done.stderr }),
      (failed: { code: number; stdout: string; stderr: string }) => ({ code: failed.code, stdout: failed.stdout, stderr: failed.stderr }),
    )
  const company = JSON.parse((await cli('companies', 'create', '--name', 'Blackholed Co')).stdout)
  const events = async () => JSON.parse((await cli('events', 'list', company.id)).stdout).events.map((e: { type: string }) => e.type)

  t.equal(await proxy.blackhole(':cmd:'), 1, "the node's command connection to Redis goes silent")
  const revoked = await cli('companies', 'revoke-tokens', company.id)
  t.equal(revoked.code, 1, 'still a failure')
  t.match(revoked.stderr, /"statusCode": 503/, 'the 503 as the node sent it')
  t.match(revoked.stderr, /may have been applied/, 'says the change may have been applied')
  t.match(revoked.stderr, `chat-auth events list ${company.id}`, 'and the command that shows whether it was')
  t.match(revoked.stderr, /company\.tokens_revoked/, 'and what to look for there')
  t.same(await events(), ['company.tokens_revoked'], 'it was applied: the revocation committed with its event')

  const read = await cli('companies', 'get', company.id)
  t.equal(read.code, 0, 'a read in the same state answers')
  t.equal(JSON.parse(read.stdout).id, company.id)
})

// ── What a hop in front of the node, or the node's data, may throw at the CLI ──

/** The CLI against `url`, with an admin token and an API key in its environment. */
const cliAt = (url: string, ...args: string[]) =>
  run(process.execPath, [CLI, ...args, '--url', url], { env: { PATH: process.env.PATH ?? '', ADMIN_TOKEN, CHAT_AUTH_KEY_ID: 'ak_test', CHAT_AUTH_KEY_SECRET: 'sk_secret_that_must_stay_home' } }).then(
    (done) => ({ code: 0, stdout: done.stdout, stderr: done.stderr }),
    (failed: { code: number; stdout: string; stderr: string }) => ({ code: failed.code, stdout: failed.stdout, stderr: failed.stderr }),
  )

async function hostile(t: { teardown(fn: () => unknown): void }, answer: Parameters<typeof hostileServer>[0]): Promise<HostileServer> {
  const made = await hostileServer(answer)
  t.teardown(() => made.close())
  return made
}

/** What a terminal would act on instead of showing: C0 (but tab and line feed), DEL, C1, bidi overrides. */
const TERMINAL_CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

storeIndependentTest('a redirect in front of the node: refused, shown as the error body, the other origin gets nothing', async (t) => {
  const elsewhere = await hostile(t, answerJson(200, { companyId: 'c1', revokedBefore: '2030-01-01T00:00:00.000Z', id: 'u1', active: false }))
  let status = 307
  const lb = await hostile(t, (request, response, seen) => redirectTo(status, `${elsewhere.origin}${seen.url}`)(request, response, seen))
  for (const [redirect, args] of [
    [307, ['companies', 'revoke-tokens', 'c1']],
    [302, ['users', 'update', 'u1', '--active', 'false']],
    [308, ['oauth', 'revoke', 'eyJ.a.b']],
    [301, ['oauth', 'introspect', 'eyJ.a.b']],
  ] as const) {
    status = redirect
    lb.seen.length = 0
    const result = await cliAt(lb.url, ...args)
    const what = `${redirect} on ${args.slice(0, 2).join(' ')}`
    t.equal(result.code, 1, `${what}: fails`)
    t.match(JSON.parse(result.stderr.slice(0, result.stderr.indexOf('\n}') + 2)), { statusCode: redirect, code: 'REDIRECT_REFUSED', message: `${elsewhere.origin}/` }, `${what}: the refusal, naming the Location`)
    t.match(result.stderr, /--url/, `${what}: says how to point the CLI at the node itself`)
    t.notMatch(result.stderr, /\n\s+at /, `${what}: no stack trace`)
    t.equal(lb.seen.length, 1, `${what}: sent once`)
  }
  t.same(elsewhere.seen, [], 'the other origin received nothing')
})

storeIndependentTest('an answer past the client\'s bound: RESPONSE_TOO_LARGE, the rest unread; a write may have been applied', async (t) => {
  const total = 128 * 1024 * 1024
  const written: number[] = []
  const flood = await hostile(t, (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.flushHeaders()
    void writeBytes(response, total).then((bytes) => written.push(bytes))
  })
  const read = await cliAt(flood.url, 'companies', 'get', 'c1')
  t.equal(read.code, 1, 'a read fails')
  t.match(JSON.parse(read.stderr), { statusCode: 200, code: 'RESPONSE_TOO_LARGE', message: /4194304 bytes/ }, 'the error body, naming the bound')
  await waitFor('the server to see the hang-up', () => written.length, { until: (n) => n === 1 })
  t.ok(written[0]! < total / 4, `the server wrote ${written[0]} of ${total} bytes`)
  const write = await cliAt(flood.url, 'companies', 'revoke-tokens', 'c1')
  t.equal(write.code, 1, 'a write fails')
  t.match(write.stderr, /"code": "RESPONSE_TOO_LARGE"/, 'with the error body')
  t.match(write.stderr, /may have been applied/, 'a write answered 200 but unread: it may have been applied')
  t.match(write.stderr, 'chat-auth events list c1', 'and how to check')
})

storeIndependentTest('what the server says reaches the terminal with its control characters escaped', async (t) => {
  // ESC and CSI (U+009B) start terminal escape sequences; CR, DEL and a bidi override rewrite
  // what a line seems to say.
  const hostileText = 'Acme\u009b2J\u001b]0;owned\u0007\r\u007f\u0085\u202eevil'
  const company = { id: 'c1', name: hostileText, defaultAgentId: null, createdAt: '2030-01-01T00:00:00.000Z' }
  const node = await hostile(t, (request, response, seen) => {
    if (seen.url.endsWith('/c1')) return answerJson(200, company)(request, response, seen)
    if (seen.url.startsWith('/oauth2/')) return answerJson(400, { error: 'invalid_request', error_description: hostileText })(request, response, seen)
    if (seen.url.endsWith('/moved')) return redirectTo(307, 'http://127.0.0.1:1/\u009b2J')(request, response, seen)
    answerJson(404, { statusCode: 404, code: 'NOT_FOUND', message: hostileText })(request, response, seen)
  })
  const shown = await cliAt(node.url, 'companies', 'get', 'c1')
  t.equal(shown.code, 0, 'an answer is shown')
  t.notMatch(shown.stdout, TERMINAL_CONTROLS, 'an answer: no raw control character')
  t.match(shown.stdout, '\\u009b2J', 'U+009B shown as \\u009b')
  t.same(JSON.parse(shown.stdout), company, 'and the JSON still reads as what the server sent')
  for (const [what, args] of [
    ['an error body', ['companies', 'get', 'c2']],
    ['an OAuth error body', ['oauth', 'introspect', 'eyJ.a.b']],
    ['a Location', ['companies', 'get', 'moved']],
  ] as const) {
    const failed = await cliAt(node.url, ...args)
    t.equal(failed.code, 1, `${what}: fails`)
    t.notMatch(failed.stderr, TERMINAL_CONTROLS, `${what}: no raw control character`)
    t.match(failed.stderr, '\\u009b2J', `${what}: U+009B shown as \\u009b`)
  }
})

/** What a terminal shows without its colours. */
const withoutColours = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, '')

storeIndependentTest("serve on a terminal: readable log lines, the first run's admin token and demo data framed apart from them", async (t) => {
  // util-linux's script(1) gives the node a pseudo-terminal, as a person's shell would.
  const port = await freePort()
  const node = spawnProcess('script', ['-qfec', `${process.execPath} ${CLI} serve`, '/dev/null'], {
    name: 'serve on a terminal',
    env: { HOST: '127.0.0.1', PORT: String(port), DATA_DIR: await migratedDataDir(t), LOG_LEVEL: 'info', JWT_SECRET },
  })
  t.teardown(() => node.stop())
  await waitFor('the node listening, and the first-run notice', () => withoutColours(node.output()), {
    until: (text) => text.includes('chat-auth listening') && text.includes('Bearer <token>"'),
    timeoutMs: 120_000,
  })
  // The frame's last line follows the notice at once; a node without one is judged as it is.
  const output = await waitFor('the frame closed', () => withoutColours(node.output()), { until: (text) => text.includes('\n└'), timeoutMs: 5_000 }).catch(() => withoutColours(node.output()))
  const lines = output.split(/\r?\n/)
  t.same(lines.filter((line) => line.startsWith('{')), [], 'no JSON line on a terminal')
  const listening = lines.findIndex((line) => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: chat-auth listening \{"url":"http:\/\/127\.0\.0\.1:\d+"/.test(line))
  t.ok(listening >= 0, 'a log line reads as time, level, message and its fields on one line')
  const top = lines.findIndex((line) => line.startsWith('┌'))
  const bottom = lines.findIndex((line) => line.startsWith('└'))
  t.ok(listening < top && top < bottom, 'the notice comes after the line that says where the node listens, in a frame')
  const notice = lines.slice(top + 1, bottom)
  t.same(notice.filter((line) => !line.startsWith('│')), [], 'no log line inside the frame')
  const adminToken = notice.map((line) => /ADMIN_TOKEN=(\S+)/.exec(line)?.[1]).find(Boolean)
  const companyId = notice.map((line) => /company\s+(\S+)/.exec(line)?.[1]).find(Boolean)
  t.ok(adminToken && companyId && notice.some((line) => /keySecret\s+sk_\S+/.test(line)), 'the generated admin token and the demo key are in it')
  const company = await fetch(`http://127.0.0.1:${port}/admin/v1/companies/${companyId}`, { headers: { authorization: `Bearer ${adminToken}` } })
  t.equal(company.status, 200, 'the admin token shown is the one the node takes')
})

storeIndependentTest('serve off a terminal: every log line is JSON, the first-run notice plain text', async (t) => {
  const node = await startGatewayProcess({ DATA_DIR: await migratedDataDir(t), SEED_DEMO: 'true', ADMIN_TOKEN: undefined, LOG_LEVEL: 'info' } as unknown as Record<string, string>, {
    teardown: t.teardown.bind(t),
    timeoutMs: 120_000,
  })
  // Off a terminal the log lines go out through pino's asynchronous writer and the notice
  // straight to stdout, so on a busy machine either can come first: wait for both.
  const output = await waitFor('the first-run notice and the listening line', () => node.output(), { until: (text) => text.includes('keySecret') && text.includes('"msg":"chat-auth listening"'), timeoutMs: 30_000 })
  t.notMatch(output, /\u001b|│|┌/, 'no colour and no frame')
  const logLines = output.split('\n').filter((line) => line.startsWith('{'))
  const parsed = logLines.map((line) => JSON.parse(line) as { level?: unknown; msg?: unknown })
  t.ok(parsed.length > 0 && parsed.every((line) => typeof line.level === 'number' && typeof line.msg === 'string'), 'each log line a JSON object with a level and a message')
  t.ok(parsed.some((line) => line.msg === 'chat-auth listening'), 'the listening line among them')
  t.match(output, /^ {2}ADMIN_TOKEN=adm_\S+$/m, 'the generated admin token, on a line of its own')
  t.match(output, /^ {2}keyId +ak_\S+$/m, 'the demo key')
})
