import { describe, isHeaderValue } from './input.js'

/**
 * The client's options, checked when it is made. A wrong option is the program's mistake,
 * not a failure of a call: it throws a TypeError that names the option, at construction.
 */

export interface TransportOptions {
  /** the gateway's base URL (http or https, no user:password); a path in it (a proxy's prefix) is kept */
  baseUrl: string | URL
  /** per attempt, in milliseconds: a whole number from 1 to 2,147,483,647 (default 10,000) */
  timeoutMs?: number
  /** further attempts of a call that is safe to repeat: a whole number ≥ 0 (default 2) */
  retries?: number
  /** the first wait between attempts, doubled each time: a finite number ≥ 0 (default 100 ms; a Retry-After wins, up to 5 s) */
  retryDelayMs?: number
  /**
   * the most bytes of one answer's body the client reads (after decompression): a whole number
   * ≥ 1 (default 4 MiB, 4,194,304: the gateway's largest answers, 500 events or deliveries,
   * are well below it); past it the call fails with RESPONSE_TOO_LARGE
   */
  maxResponseBytes?: number
  /** another fetch (a proxy agent, a test double); default the global fetch. It is asked not to follow redirects (`redirect: 'manual'`) */
  fetch?: typeof fetch
  /** fetch's `credentials` for every call (a page of the console: `'same-origin'`, so that the browser sends the session cookie) */
  credentials?: 'omit' | 'same-origin' | 'include'
}

export interface ClientOptions extends TransportOptions {
  /** the company's API key, for issueToken, invalidate and revokeToken */
  apiKey?: { keyId: string; keySecret: string }
  /** the deployment's ADMIN_TOKEN or an operator's token, for the `admin` calls (it travels in a header: no line break or character above U+00FF) */
  adminToken?: string
  /**
   * A console session's anti-CSRF token (SPEC §10.3), instead of `adminToken`: the `admin`
   * calls then send no Authorization, the browser's session cookie authenticates them (set
   * `credentials`), and every write carries this as `x-csrf-token`.
   */
  csrf?: string
}

export interface TransportSettings {
  base: URL
  timeoutMs: number
  retries: number
  retryDelayMs: number
  maxResponseBytes: number
  fetch: typeof fetch
  credentials: 'omit' | 'same-origin' | 'include' | undefined
}

/** 4 MiB: far above the gateway's largest answer, far below what would hurt a caller to hold */
const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024

/** setTimeout's (and so AbortSignal.timeout's) largest delay */
const MAX_TIMEOUT_MS = 2 ** 31 - 1

function optionError(option: string, expected: string, value: unknown): TypeError {
  return new TypeError(`client option ${option}: expected ${expected}, got ${describe(value)}`)
}

export function transportSettings(options: TransportOptions): TransportSettings {
  if (typeof options !== 'object' || options === null) throw new TypeError(`client options: expected an object with baseUrl, got ${describe(options)}`)
  const { timeoutMs = 10_000, retries = 2, retryDelayMs = 100, maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES, fetch = globalThis.fetch } = options
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS) throw optionError('timeoutMs', `a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS}`, timeoutMs)
  if (!Number.isInteger(retries) || retries < 0) throw optionError('retries', 'a whole number ≥ 0', retries)
  if (typeof retryDelayMs !== 'number' || !Number.isFinite(retryDelayMs) || retryDelayMs < 0) throw optionError('retryDelayMs', 'a finite number of milliseconds ≥ 0', retryDelayMs)
  if (!Number.isSafeInteger(maxResponseBytes) || maxResponseBytes < 1) throw optionError('maxResponseBytes', `a whole number of bytes from 1 to ${Number.MAX_SAFE_INTEGER}`, maxResponseBytes)
  if (typeof fetch !== 'function') throw optionError('fetch', 'a function like the global fetch', fetch)
  const { credentials } = options
  if (credentials !== undefined && !['omit', 'same-origin', 'include'].includes(credentials)) throw optionError('credentials', "'omit', 'same-origin' or 'include'", credentials)
  return { base: baseUrl(options.baseUrl), timeoutMs, retries, retryDelayMs, maxResponseBytes, fetch, credentials }
}

function baseUrl(value: unknown): URL {
  const expected = 'an http or https URL without user:password'
  if (typeof value !== 'string' && !(value instanceof URL)) throw optionError('baseUrl', expected, value)
  let base: URL
  try {
    base = new URL(value)
  } catch {
    throw new TypeError(`client option baseUrl: expected ${expected}, got "${String(value)}"`)
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError(`client option baseUrl: expected ${expected}, got the protocol ${base.protocol}`)
  // fetch refuses a URL with credentials; say so now, not as a network error on each call
  if (base.username !== '' || base.password !== '') throw new TypeError(`client option baseUrl: expected ${expected}; pass the admin token as adminToken`)
  // Paths are joined below the base's own path, so that a prefix like /auth/ is kept.
  if (!base.pathname.endsWith('/')) base.pathname += '/'
  return base
}

export function checkCredentials({ apiKey, adminToken, csrf }: ClientOptions): void {
  if (csrf !== undefined && !isHeaderValue(csrf)) throw optionError('csrf', 'the session\'s csrf, a string a header can carry', csrf)
  if (adminToken !== undefined && !isHeaderValue(adminToken)) {
    throw typeof adminToken === 'string' ? new TypeError('client option adminToken: holds a character an HTTP header cannot carry (a line break, a control character or one above U+00FF)') : optionError('adminToken', 'a string', adminToken)
  }
  if (apiKey === undefined) return
  const key = apiKey as { keyId?: unknown; keySecret?: unknown } | null
  if (typeof key !== 'object' || key === null || typeof key.keyId !== 'string' || typeof key.keySecret !== 'string') {
    throw new TypeError('client option apiKey: expected { keyId: string, keySecret: string }')
  }
}
