import { ChatAuthError, CLIENT_CODES } from './errors.js'

/**
 * Checks of what a caller hands a call, made before anything is sent. A token often comes
 * from an end user: one that HTTP cannot carry must fail as the caller's mistake
 * (INVALID_ARGUMENT), never as a network failure that would be retried and read as "the
 * gateway is down".
 */

export function invalidArgument(message: string, cause?: unknown): ChatAuthError {
  return new ChatAuthError(0, CLIENT_CODES.INVALID_ARGUMENT, message, { cause })
}

/**
 * A field value as RFC 9110 writes it (tab, space, visible ASCII, and bytes 0x80–0xFF):
 * no CR, LF or NUL, which fetch refuses, no other control character, which the server's
 * parser refuses, and nothing above U+00FF, which is not a byte at all.
 */
export function isHeaderValue(value: unknown): value is string {
  return typeof value === 'string' && !/[^\t\x20-\x7e\x80-\xff]/.test(value)
}

/** A token for the Authorization header. */
export function bearerToken(token: unknown): string {
  if (typeof token !== 'string') throw invalidArgument(`the token must be a string, not ${describe(token)}`)
  if (!isHeaderValue(token)) throw invalidArgument('the token holds a character an HTTP header cannot carry (a line break, a control character or one above U+00FF): it is not a token the gateway issued')
  return token
}

/** An id, encoded as one path segment. */
export function pathSegment(value: unknown, what: string): string {
  if (typeof value !== 'string') throw invalidArgument(`${what} must be a string, not ${describe(value)}`)
  try {
    return encodeURIComponent(value)
  } catch (error) {
    // a lone surrogate: not text that UTF-8 can encode
    throw invalidArgument(`${what} is not well-formed text`, error)
  }
}

/** A request body as JSON. */
export function jsonBody(body: unknown): string {
  try {
    return JSON.stringify(body)
  } catch (error) {
    // a BigInt, or an object that contains itself
    throw invalidArgument(`the request body cannot be written as JSON (${(error as Error).message})`, error)
  }
}

/** The caller's abort signal, if any. */
export function abortSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined || signal instanceof AbortSignal) return signal
  throw invalidArgument(`the signal option must be an AbortSignal, not ${describe(signal)}`)
}

export function describe(value: unknown): string {
  if (value === null) return 'null'
  if (typeof value === 'string') return 'a string'
  if (typeof value === 'number' && Number.isNaN(value)) return 'NaN'
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value)
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`
}
