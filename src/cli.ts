#!/usr/bin/env node
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { CLIENT_VARIABLES, ConfigError, loadClientConfig, loadConfig, tracingRequested, VARIABLES, type Variable } from './config.js'
import { adminCall, adminUsage, howToCheckWrite, isAdminGroup, UsageError, type AdminCall } from './admin-calls.js'
import { ChatAuthClient, ChatAuthError, CLIENT_CODES, type AdminClient } from './client/index.js'
import { oauthCall, oauthKey, oauthUsage } from './oauth-calls.js'
import { printable } from './terminal-text.js'

const USAGE = `chat-auth — chat token gateway

Usage:
  chat-auth serve          start a node (configured by the environment, below)
  chat-auth migrate        apply pending migrations and exit
  chat-auth --version      print the version
  chat-auth --help         this text

Admin calls against a running node (--url URL, --admin-token TOKEN: ADMIN_TOKEN or an operator's token):
${adminUsage()}
Token introspection and revocation as an OAuth client of a running node (--url URL, --key-id KEY_ID):
${oauthUsage()}
Environment read by the admin and oauth calls (name, default, meaning):
${variableList(CLIENT_VARIABLES)}

Environment read by serve and migrate (name, default, meaning; the README says more):
${variableList(VARIABLES)}
serve also exports traces over OTLP when the standard OpenTelemetry variables ask for them
(OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, …: the README's "OpenTelemetry").
`

function parseCommandLine(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        'admin-token': { type: 'string' },
        'key-id': { type: 'string' },
        name: { type: 'string' },
        'default-agent-id': { type: 'string' },
        active: { type: 'string' },
        inactive: { type: 'boolean' },
        limit: { type: 'string' },
        before: { type: 'string' },
        after: { type: 'string' },
        role: { type: 'string' },
        query: { type: 'string' },
        'company-id': { type: 'string' },
        'external-id': { type: 'string' },
        endpoint: { type: 'string' },
        types: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    })
  } catch (error) {
    // An unknown or malformed flag is the user's to fix: say so with the usage.
    throw new UsageError(error instanceof Error ? error.message : String(error))
  }
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine(argv)
  const [command, action, id] = positionals
  if (values.version) {
    print(process.stdout, version() + '\n')
    return 0
  }
  if (values.help || command === undefined || command === 'help') {
    if (command === 'oauth') print(process.stdout, `Usage:\n${oauthUsage()}`)
    else if (command !== undefined && isAdminGroup(command)) print(process.stdout, `Usage:\n${adminUsage(command)}`)
    else print(process.stdout, USAGE)
    return command === undefined && !values.help ? 1 : 0
  }

  // The server's modules load only for serve and migrate: an admin call needs the client alone.
  if (command === 'serve') {
    // Before the server's modules: the instrumentation must see pg and ioredis load.
    const telemetry = tracingRequested() ? await (await import('./telemetry/start.js')).startTracing() : undefined
    const [{ createLogger }, { closeOnSignals, startServer }] = await Promise.all([import('./logger.js'), import('./server.js')])
    const config = loadConfig()
    const logger = createLogger(config)
    const server = await startServer(config, logger)
    closeOnSignals(server, logger, telemetry?.shutdown)
    return -1 // keep running
  }

  if (command === 'migrate') {
    const [{ createPgliteDb, createPostgresDb }, { migrate }] = await Promise.all([import('./store/db.js'), import('./store/migrate.js')])
    const config = loadConfig()
    const db = config.databaseUrl ? createPostgresDb(config.databaseUrl, { preparedStatements: config.databasePreparedStatements }) : await createPgliteDb(config.dataDir)
    try {
      const { applied } = await migrate(db)
      print(process.stdout, applied.length ? `applied: ${applied.join(', ')}\n` : 'schema is up to date\n')
    } finally {
      await db.close()
    }
    return 0
  }

  const settings = loadClientConfig()
  if (command === 'oauth') return runOAuthCall(action ?? '', id, values['key-id'] ?? settings.keyId, settings.keySecret, values.url ?? settings.url)
  const call = adminCall(command, action ?? '', id, values)
  // A token on the command line is visible to every user of the machine: `-` reads it from standard input.
  if (call.call === 'revokeToken' && call.args[0] === '-') call.args[0] = (await readStdin()).trim()
  const adminToken = values['admin-token'] ?? settings.adminToken
  if (!adminToken) throw new UsageError('set ADMIN_TOKEN or pass --admin-token')
  const base = values.url ?? settings.url
  const client = new ChatAuthClient({ baseUrl: base, adminToken })
  try {
    print(process.stdout, JSON.stringify(await runAdminCall(client.admin, call), null, 2) + '\n')
    return 0
  } catch (error) {
    if (!(error instanceof ChatAuthError)) throw error
    const check = outcomeUnknown(error) ? howToCheckWrite(call) : undefined
    const note = check === undefined ? '' : `the change may have been applied all the same (the node may have committed it before its answer failed). To check: ${check}.`
    if (error.code === CLIENT_CODES.NETWORK_ERROR || error.code === CLIENT_CODES.TIMEOUT) throw new Unreachable(base, error, note)
    if (error.statusCode === 0) throw error
    // The gateway's error body, as it sent it, then what it may mean for a write.
    reportError(error, note)
    return 1
  }
}

/** `chat-auth oauth introspect|revoke TOKEN|-`: the answer on stdout, the error body on stderr. */
async function runOAuthCall(action: string, tokenArgument: string | undefined, keyId: string | undefined, keySecret: string | undefined, base: string): Promise<number> {
  const { call, token } = await oauthCall(action, tokenArgument, readStdin)
  const client = new ChatAuthClient({ baseUrl: base, apiKey: oauthKey(keyId, keySecret) })
  try {
    if (call === 'introspect') print(process.stdout, JSON.stringify(await client.oauth.introspect(token), null, 2) + '\n')
    else await client.oauth.revoke(token)
    return 0
  } catch (error) {
    if (!(error instanceof ChatAuthError)) throw error
    // Revoking again is harmless: no doubt to explain, as there is for the admin writes.
    if (error.code === CLIENT_CODES.NETWORK_ERROR || error.code === CLIENT_CODES.TIMEOUT) throw new Unreachable(base, error, '')
    if (error.statusCode === 0) throw error
    reportError(error, '')
    return 1
  }
}

/** Whatever the CLI prints may hold the server's words: never a raw control character (terminal-text.ts). */
function print(stream: NodeJS.WriteStream, text: string): void {
  stream.write(printable(text))
}

/** The error body (the gateway's, or the client's own code), then what the user can do about it. */
function reportError(error: ChatAuthError, note: string): void {
  const redirected = error.code === CLIENT_CODES.REDIRECT_REFUSED ? 'a redirect is never followed: point --url or CHAT_AUTH_URL at the node itself, not at what redirects to it' : ''
  const lines = [note, redirected].filter(Boolean).map((line) => `chat-auth: ${line}\n`)
  print(process.stderr, JSON.stringify(error, null, 2) + '\n' + lines.join(''))
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * Whether a call may have been applied although it failed: no answer came after it was sent,
 * the node (or a proxy) answered 502, 503 or 504, or a success came too large to be read. A
 * refused connection sent nothing.
 */
function outcomeUnknown(error: ChatAuthError): boolean {
  if (error.code === CLIENT_CODES.TIMEOUT) return true
  if (error.code === CLIENT_CODES.RESPONSE_TOO_LARGE) return error.statusCode >= 200 && error.statusCode <= 299
  if (error.code === CLIENT_CODES.NETWORK_ERROR) return !NOTHING_SENT.has(fetchFailure(error)?.code ?? '')
  return error.statusCode === 502 || error.statusCode === 503 || error.statusCode === 504
}

/** Connection errors that leave no doubt: the call never reached a node. */
const NOTHING_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])

/** fetch's own reason (ECONNREFUSED, …), which sits under its "fetch failed" */
function fetchFailure(error: ChatAuthError): (Error & { code?: string }) | undefined {
  return ((error.cause as (Error & { cause?: Error }) | undefined)?.cause as (Error & { code?: string }) | undefined) ?? undefined
}

/** One admin call of the client, as the command line named it. */
function runAdminCall(admin: AdminClient, { call, args }: AdminCall): Promise<unknown> {
  return (admin[call] as (...args: unknown[]) => Promise<unknown>)(...args)
}

/** No answer from the node: say where we called, why it failed, and how to call elsewhere. */
class Unreachable extends Error {
  constructor(base: string, error: ChatAuthError, note: string) {
    const reason = error.code === CLIENT_CODES.TIMEOUT ? 'no answer in time' : (fetchFailure(error)?.message ?? (error.cause as Error | undefined)?.message ?? error.message)
    super(
      `could not reach a chat-auth node at ${base} (${reason}).\n` +
        `Start one with "chat-auth serve", or point the CLI at yours with --url URL or CHAT_AUTH_URL=URL.` +
        (note && `\nIf it was reached, ${note}`),
    )
  }
}

function version(): string {
  // dist/src/cli.js → the package's own package.json
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version
}

/** One line per variable: its name, its default (or what unset means), and what it means. */
function variableList(table: Record<string, Variable<unknown>>): string {
  const rows = Object.entries(table).map(([name, { default: fallback, unset, accepts, help }]) => [name, fallback ?? unset ?? '', accepts ? `${help} [${accepts}]` : help] as const)
  const nameWidth = Math.max(...rows.map(([name]) => name.length)) + 2
  const defaultWidth = Math.max(...rows.map(([, fallback]) => fallback.length)) + 2
  return rows.map(([name, fallback, help]) => `  ${name.padEnd(nameWidth)}${fallback.padEnd(defaultWidth)}${help}`).join('\n')
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code
  },
  (error) => {
    if (error instanceof ConfigError) print(process.stderr, `chat-auth: configuration error: ${error.message}\n`)
    else if (error instanceof UsageError) {
      const usage = error.group === undefined ? USAGE : `Usage:\n${error.group === 'oauth' ? oauthUsage() : adminUsage(error.group)}`
      print(process.stderr, `chat-auth: ${error.message}\n\n${usage}`)
    } else print(process.stderr, `chat-auth: ${error instanceof Error ? error.message : String(error)}\n`)
    process.exitCode = error instanceof UsageError ? 2 : 1
  },
)
