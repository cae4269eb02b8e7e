#!/usr/bin/env node
import { parseArgs } from 'node:util'
import { ConfigError, loadClientConfig, loadConfig } from './config.js'
import { createLogger } from './logger.js'
import { closeOnSignals, startServer } from './server.js'
import { createPgliteDb, createPostgresDb } from './store/db.js'
import { migrate } from './store/migrate.js'

const USAGE = `chat-auth — chat token gateway

Usage:
  chat-auth serve                                   start a node (configuration from the environment)
  chat-auth migrate                                 apply pending migrations and exit

Admin calls against a running node (--url, default $CHAT_AUTH_URL or http://$HOST:$PORT;
--admin-token, default $ADMIN_TOKEN):
  chat-auth companies create --name NAME
  chat-auth companies get COMPANY_ID
  chat-auth companies update COMPANY_ID [--name NAME] [--default-agent-id AGENT_ID]
  chat-auth agents create COMPANY_ID --name NAME [--inactive]
  chat-auth agents update AGENT_ID [--name NAME] [--active true|false]
  chat-auth api-keys create COMPANY_ID [--name NAME]
  chat-auth api-keys list COMPANY_ID
  chat-auth api-keys revoke KEY_ID
  chat-auth users get CUSTOMER_USER_ID
  chat-auth users update CUSTOMER_USER_ID --active true|false
`

interface AdminCall {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  body?: Record<string, unknown>
}

type Flags = { name?: string; 'default-agent-id'?: string; active?: string; inactive?: boolean }

/** Maps `resource action [id] --flags` to the admin API call of SPEC §4. */
export function adminCall(resource: string, action: string, id: string | undefined, flags: Flags): AdminCall {
  const need = (value: string | undefined, what: string): string => {
    if (!value) throw new UsageError(`${resource} ${action} needs ${what}`)
    return encodeURIComponent(value)
  }
  const active = (): boolean | undefined => {
    if (flags.active === undefined) return undefined
    if (flags.active !== 'true' && flags.active !== 'false') throw new UsageError('--active takes true or false')
    return flags.active === 'true'
  }
  const defined = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined))
  switch (`${resource} ${action}`) {
    case 'companies create':
      return { method: 'POST', path: '/admin/v1/companies', body: { name: need(flags.name, '--name') && flags.name } }
    case 'companies get':
      return { method: 'GET', path: `/admin/v1/companies/${need(id, 'a company id')}` }
    case 'companies update':
      return { method: 'PATCH', path: `/admin/v1/companies/${need(id, 'a company id')}`, body: defined({ name: flags.name, defaultAgentId: flags['default-agent-id'] }) }
    case 'agents create':
      return { method: 'POST', path: `/admin/v1/companies/${need(id, 'a company id')}/agents`, body: { name: need(flags.name, '--name') && flags.name, active: !flags.inactive } }
    case 'agents update':
      return { method: 'PATCH', path: `/admin/v1/agents/${need(id, 'an agent id')}`, body: defined({ name: flags.name, active: active() }) }
    case 'api-keys create':
      return { method: 'POST', path: `/admin/v1/companies/${need(id, 'a company id')}/api-keys`, body: defined({ name: flags.name }) }
    case 'api-keys list':
      return { method: 'GET', path: `/admin/v1/companies/${need(id, 'a company id')}/api-keys` }
    case 'api-keys revoke':
      return { method: 'DELETE', path: `/admin/v1/api-keys/${need(id, 'a key id')}` }
    case 'users get':
      return { method: 'GET', path: `/admin/v1/customer-users/${need(id, 'a customer user id')}` }
    case 'users update': {
      const value = active()
      if (value === undefined) throw new UsageError('users update needs --active true|false')
      return { method: 'PATCH', path: `/admin/v1/customer-users/${need(id, 'a customer user id')}`, body: { active: value } }
    }
  }
  throw new UsageError(`unknown command: ${resource} ${action}`)
}

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      url: { type: 'string' },
      'admin-token': { type: 'string' },
      name: { type: 'string' },
      'default-agent-id': { type: 'string' },
      active: { type: 'string' },
      inactive: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  })
  const [command, action, id] = positionals
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE)
    return command === undefined && !values.help ? 1 : 0
  }

  if (command === 'serve') {
    const config = loadConfig()
    const logger = createLogger(config)
    const server = await startServer(config, logger)
    closeOnSignals(server, logger)
    return -1 // keep running
  }

  if (command === 'migrate') {
    const config = loadConfig()
    const db = config.databaseUrl ? createPostgresDb(config.databaseUrl) : await createPgliteDb(config.dataDir)
    try {
      const { applied } = await migrate(db)
      process.stdout.write(applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n')
    } finally {
      await db.close()
    }
    return 0
  }

  const client = loadClientConfig()
  const call = adminCall(command, action ?? '', id, values)
  const adminToken = values['admin-token'] ?? client.adminToken
  if (!adminToken) throw new UsageError('set ADMIN_TOKEN or pass --admin-token')
  const response = await fetch(new URL(call.path, values.url ?? client.url), {
    method: call.method,
    headers: { authorization: `Bearer ${adminToken}`, ...(call.body ? { 'content-type': 'application/json' } : {}) },
    body: call.body ? JSON.stringify(call.body) : undefined,
  })
  const text = await response.text()
  let output = text
  try {
    output = JSON.stringify(JSON.parse(text), null, 2)
  } catch {}
  ;(response.ok ? process.stdout : process.stderr).write(output + '\n')
  return response.ok ? 0 : 1
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code
  },
  (error) => {
    if (error instanceof ConfigError) process.stderr.write(`chat-auth: configuration error: ${error.message}\n`)
    else if (error instanceof UsageError) process.stderr.write(`chat-auth: ${error.message}\n\n${USAGE}`)
    else process.stderr.write(`chat-auth: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = error instanceof UsageError ? 2 : 1
  },
)
