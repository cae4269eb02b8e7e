#!/usr/bin/env node
import { parseArgs } from 'node:util'
import { ConfigError, loadClientConfig, loadConfig } from './config.js'
import { createLogger } from './logger.js'
import { closeOnSignals, startServer } from './server.js'
import { createPgliteDb, createPostgresDb } from './store/db.js'
import { migrate } from './store/migrate.js'
import { adminCall, UsageError } from './admin-calls.js'

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
