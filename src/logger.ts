import pino, { type Logger } from 'pino'
import type { Config } from './config.js'

/**
 * Secrets never reach the log: API key secrets, admin and bearer tokens, JWTs and the
 * key material of the configuration are censored wherever they appear in a log object.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'keySecret',
  '*.keySecret',
  'body.keySecret',
  'token',
  '*.token',
  'adminToken',
  '*.adminToken',
  'secret',
  '*.secret',
  'privateKey',
  '*.privateKey',
  'jwt.keys',
  'config.jwt.keys',
  'config.adminToken',
]

export function createLogger(config: Pick<Config, 'logLevel'>, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level: config.logLevel,
      base: { service: 'chat-auth' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: {
        // The request line only: a query string or a body may carry what must not be logged.
        req: (req: { method?: string; url?: string; id?: string }) => ({ id: req.id, method: req.method, url: req.url?.split('?')[0] }),
        err: serializeError,
      },
    },
    destination,
  )
}

/**
 * The same logger for a person at a terminal (`chat-auth serve` whose stdout is a TTY): each
 * line readable (pino-pretty: time, level, message, its fields on the same line) instead of
 * JSON, which a log collector reads but a person skims badly. Redaction is the logger's, before
 * any formatting. pino-pretty is loaded only then: a node in a container never loads it.
 */
export async function createTerminalLogger(config: Pick<Config, 'logLevel'>): Promise<Logger> {
  const { default: pretty } = await import('pino-pretty')
  // sync: a line is on the terminal before whatever the node prints next (the first-run notice).
  return createLogger(config, pretty({ sync: true, singleLine: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' }))
}

/**
 * Only what explains the error: a driver error may carry the statement's parameters. A
 * value that is not an Error (a string someone logged as `err`) keeps its text.
 */
function serializeError(error: unknown): Record<string, unknown> {
  if (error instanceof Error) return { type: error.name, message: error.message, code: (error as { code?: unknown }).code, stack: error.stack }
  if (typeof error === 'object' && error !== null) {
    const record = error as { name?: unknown; message?: unknown; code?: unknown; stack?: unknown }
    if (typeof record.message === 'string') return { type: record.name, message: record.message, code: record.code, stack: record.stack }
    // Its fields could be anything (a config, a token): name them, never their values.
    return { type: 'object', message: `an object with ${Object.keys(error).join(', ') || 'no fields'}` }
  }
  return { type: typeof error, message: String(error) }
}

