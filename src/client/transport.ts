import { ChatAuthError, CLIENT_CODES } from './errors.js'
import { abortSignal, bearerToken, jsonBody } from './input.js'
import { transportSettings, type TransportOptions, type TransportSettings } from './options.js'
import { answerText } from './response.js'

export type { TransportOptions } from './options.js'

export interface Call {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  query?: Record<string, string | number | undefined>
  body?: unknown
  /** an application/x-www-form-urlencoded body instead of JSON (the OAuth endpoints) */
  form?: Record<string, string>
  /**
   * The OAuth endpoints' ways: error bodies are RFC 6749's `{error, error_description?}`
   * (the ChatAuthError's `code` is `error`), and `emptyAnswer` a success with no body.
   */
  oauth?: { emptyAnswer: boolean }
  /** a success with no body (204) */
  emptyAnswer?: boolean
  /** the Authorization header's token, where the call has one (present as a key even when the caller passed undefined: that is checked, not left out) */
  bearer?: string
  /** more headers (a console session's anti-CSRF token) */
  headers?: Record<string, string>
  /**
   * Whether the call may be sent again after a failure that leaves its outcome unknown: a
   * read, or a write that leaves the same state however often it runs. Never a call that
   * would act twice (issue, invalidate, create, revoke-everything-so-far).
   */
  idempotent: boolean
  /** the caller's own signal, next to the timeout */
  signal?: AbortSignal | undefined
  /**
   * The one answer the call resolves with, where acting on another would be wrong (verify:
   * a 200 with the identity); any other success is PROTOCOL_ERROR.
   */
  expect?: { status: number; matches: (body: unknown) => boolean; what: string }
}

/** A call checked and written out once, before its first attempt. */
interface Request {
  call: Call
  url: URL
  headers: Record<string, string>
  body: string | undefined
  signal: AbortSignal | undefined
}

/** What is worth another attempt: no answer, or a status that says "not now" (the body has no say). */
const RETRY_STATUSES = new Set([502, 503, 504])

const MAX_RETRY_WAIT_MS = 5000

/** The gateway's HTTP API over fetch: timeouts, safe retries, and errors as {@link ChatAuthError}. */
export class Transport {
  private readonly settings: TransportSettings

  /** Throws a TypeError naming the option that is wrong (options.ts). */
  constructor(options: TransportOptions) {
    this.settings = transportSettings(options)
  }

  /** The URL a call goes to (also what an error message names). */
  url(path: string, query: Call['query'] = {}): URL {
    const url = new URL(path.replace(/^\//, ''), this.settings.base)
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value))
    return url
  }

  /** Rejects with INVALID_ARGUMENT, before anything is sent, when the call cannot be written out. */
  async send<T>(call: Call): Promise<T> {
    const request = this.prepare(call)
    const attempts = call.idempotent ? this.settings.retries + 1 : 1
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt<T>(request)
      } catch (error) {
        if (!(error instanceof ChatAuthError) || attempt >= attempts || !worthRetrying(error)) throw error
        await wait(this.retryWait(error, attempt), call.signal)
      }
    }
  }

  private prepare(call: Call): Request {
    const headers: Record<string, string> = { accept: 'application/json' }
    if (call.body !== undefined) headers['content-type'] = 'application/json'
    if (call.form !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded'
    if ('bearer' in call) headers.authorization = `Bearer ${bearerToken(call.bearer)}`
    Object.assign(headers, call.headers)
    const body = call.form !== undefined ? new URLSearchParams(call.form).toString() : call.body === undefined ? undefined : jsonBody(call.body)
    return { call, url: this.url(call.path, call.query), headers, body, signal: abortSignal(call.signal) }
  }

  private async attempt<T>({ call, url, headers, body: sent, signal: callerSignal }: Request): Promise<T> {
    const timeout = AbortSignal.timeout(this.settings.timeoutMs)
    const signal = callerSignal === undefined ? timeout : AbortSignal.any([callerSignal, timeout])
    let response: Response
    let text: string
    try {
      const { fetch, maxResponseBytes } = this.settings
      // A redirect is refused, never followed (response.ts says why).
      const credentials = this.settings.credentials === undefined ? {} : { credentials: this.settings.credentials }
      response = await fetch(url, { method: call.method, headers, body: sent, signal, redirect: 'manual', ...credentials })
      text = await answerText(response, maxResponseBytes, `${call.method} ${url.pathname}`)
    } catch (error) {
      if (error instanceof ChatAuthError) throw error
      throw noAnswer(error, url, callerSignal)
    }
    const body = parseJson(text)
    if (response.ok && (call.oauth?.emptyAnswer || call.emptyAnswer)) return undefined as T
    if (response.ok) {
      if (call.expect !== undefined && (response.status !== call.expect.status || !call.expect.matches(body))) {
        throw new ChatAuthError(response.status, CLIENT_CODES.PROTOCOL_ERROR, `${call.method} ${url.pathname} answered ${response.status} without ${call.expect.what}`)
      }
      if (body === undefined) throw new ChatAuthError(response.status, CLIENT_CODES.UNEXPECTED_RESPONSE, `${call.method} ${url.pathname}: the answer is not JSON`)
      return body as T
    }
    throw answeredError(response, body, call, url)
  }

  private retryWait(error: ChatAuthError, attempt: number): number {
    if (error.retryAfter !== undefined) return Math.min(error.retryAfter * 1000, MAX_RETRY_WAIT_MS)
    // Exponential, with jitter so that many clients do not come back at once.
    const ceiling = this.settings.retryDelayMs * 2 ** (attempt - 1)
    return Math.min(ceiling / 2 + Math.random() * (ceiling / 2), MAX_RETRY_WAIT_MS)
  }
}

/** Answers that another attempt would only repeat, whatever their status. */
const NEVER_RETRIED = new Set<string>([CLIENT_CODES.REDIRECT_REFUSED, CLIENT_CODES.RESPONSE_TOO_LARGE])

/** No answer at all, or the gateway (or a proxy before it) could not serve the call for now. */
function worthRetrying(error: ChatAuthError): boolean {
  if (NEVER_RETRIED.has(error.code)) return false
  if (error.statusCode === 0) return error.code === CLIENT_CODES.NETWORK_ERROR || error.code === CLIENT_CODES.TIMEOUT
  return RETRY_STATUSES.has(error.statusCode)
}

function noAnswer(error: unknown, url: URL, callerSignal: AbortSignal | undefined): ChatAuthError {
  const where = `${url.origin}${url.pathname}`
  if (callerSignal?.aborted) return new ChatAuthError(0, CLIENT_CODES.ABORTED, `call to ${where} aborted`, { cause: error })
  if (error instanceof DOMException && error.name === 'TimeoutError') return new ChatAuthError(0, CLIENT_CODES.TIMEOUT, `no answer from ${where} in time`, { cause: error })
  const reason = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error)
  return new ChatAuthError(0, CLIENT_CODES.NETWORK_ERROR, `could not reach ${where} (${reason})`, { cause: error })
}

function answeredError(response: Response, body: unknown, call: Call, url: URL): ChatAuthError {
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'))
  if (call.oauth !== undefined && isOAuthErrorBody(body)) return new ChatAuthError(response.status, body.error, body.error_description ?? body.error, { retryAfter })
  if (isErrorBody(body, response.status)) return new ChatAuthError(response.status, body.code, body.message, { retryAfter })
  return new ChatAuthError(response.status, CLIENT_CODES.UNEXPECTED_RESPONSE, `${call.method} ${url.pathname} answered ${response.status} without the gateway's error body`, { retryAfter })
}

/** The gateway's error body, whose statusCode is the status it came with (one that disagrees is someone else's). */
function isErrorBody(body: unknown, status: number): body is { statusCode: number; code: string; message: string } {
  const candidate = body as { statusCode?: unknown; code?: unknown; message?: unknown } | null | undefined
  return candidate?.statusCode === status && typeof candidate.code === 'string' && typeof candidate.message === 'string'
}

/** RFC 6749 §5.2: `{error, error_description?}`, what the OAuth endpoints answer an error with. */
function isOAuthErrorBody(body: unknown): body is { error: string; error_description?: string } {
  const candidate = body as { error?: unknown; error_description?: unknown } | null | undefined
  return typeof candidate?.error === 'string' && (candidate.error_description === undefined || typeof candidate.error_description === 'string')
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || !/^\d+$/.test(value.trim())) return undefined
  return Number(value)
}

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new ChatAuthError(0, CLIENT_CODES.ABORTED, 'call aborted'))
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(new ChatAuthError(0, CLIENT_CODES.ABORTED, 'call aborted'))
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}
