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
        // Only what explains the error: a driver error may carry the statement's parameters.
        err: (error: { name?: string; message?: string; code?: unknown; stack?: string }) => ({
          type: error.name,
          message: error.message,
          code: error.code,
          stack: error.stack,
        }),
      },
    },
    destination,
  )
}
