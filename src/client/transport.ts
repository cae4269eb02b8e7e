import { ChatAuthError, CLIENT_CODES } from './errors.js'

export interface TransportOptions {
  /** the gateway's base URL; a path in it (a proxy's prefix) is kept */
  baseUrl: string | URL
  /** per attempt, in milliseconds (default 10,000) */
  timeoutMs?: number
  /** further attempts of a call that is safe to repeat (default 2) */
  retries?: number
  /** the first wait between attempts, doubled each time (default 100 ms; a Retry-After wins, up to 5 s) */
  retryDelayMs?: number
  /** another fetch (a proxy agent, a test double); default the global fetch */
  fetch?: typeof fetch
}

export interface Call {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  query?: Record<string, string | number | undefined>
  body?: unknown
  /** the Authorization header */
  bearer?: string
  /**
   * Whether the call may be sent again after a failure that leaves its outcome unknown: a
   * read, or a write that leaves the same state however often it runs. Never a call that
   * would act twice (issue, invalidate, create, revoke-everything-so-far).
   */
  idempotent: boolean
  /** the caller's own signal, next to the timeout */
  signal?: AbortSignal | undefined
}

const MAX_RETRY_WAIT_MS = 5000

/** The gateway's HTTP API over fetch: timeouts, safe retries, and errors as {@link ChatAuthError}. */
export class Transport {
  private readonly base: URL
  private readonly timeoutMs: number
  private readonly retries: number
  private readonly retryDelayMs: number
  private readonly fetch: typeof fetch

  constructor(options: TransportOptions) {
    const base = new URL(options.baseUrl)
    // Paths are joined below the base's own path, so that a prefix like /auth/ is kept.
    if (!base.pathname.endsWith('/')) base.pathname += '/'
    this.base = base
    this.timeoutMs = options.timeoutMs ?? 10_000
    this.retries = Math.max(0, options.retries ?? 2)
    this.retryDelayMs = options.retryDelayMs ?? 100
    this.fetch = options.fetch ?? globalThis.fetch
  }

  /** The URL a call goes to (also what an error message names). */
  url(path: string, query: Call['query'] = {}): URL {
    const url = new URL(path.replace(/^\//, ''), this.base)
    for (const [name, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(name, String(value))
    return url
  }

  async send<T>(call: Call): Promise<T> {
    const attempts = call.idempotent ? this.retries + 1 : 1
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.attempt<T>(call)
      } catch (error) {
        if (!(error instanceof ChatAuthError) || attempt >= attempts || !worthRetrying(error)) throw error
        await wait(this.retryWait(error, attempt), call.signal)
      }
    }
  }

  private async attempt<T>(call: Call): Promise<T> {
    const url = this.url(call.path, call.query)
    const signal = call.signal === undefined ? AbortSignal.timeout(this.timeoutMs) : AbortSignal.any([call.signal, AbortSignal.timeout(this.timeoutMs)])
    const headers: Record<string, string> = { accept: 'application/json' }
    if (call.body !== undefined) headers['content-type'] = 'application/json'
    if (call.bearer !== undefined) headers.authorization = `Bearer ${call.bearer}`
    let response: Response
    let text: string
    try {
      response = await this.fetch(url, { method: call.method, headers, body: call.body === undefined ? undefined : JSON.stringify(call.body), signal })
      text = await response.text()
    } catch (error) {
      throw noAnswer(error, url, call.signal)
    }
    const body = parseJson(text)
    if (response.ok) {
      if (body === undefined) throw new ChatAuthError(response.status, CLIENT_CODES.UNEXPECTED_RESPONSE, `${call.method} ${url.pathname}: the answer is not JSON`)
      return body as T
    }
    throw answeredError(response, body, call, url)
  }

  private retryWait(error: ChatAuthError, attempt: number): number {
    if (error.retryAfter !== undefined) return Math.min(error.retryAfter * 1000, MAX_RETRY_WAIT_MS)
    // Exponential, with jitter so that many clients do not come back at once.
    const ceiling = this.retryDelayMs * 2 ** (attempt - 1)
    return Math.min(ceiling / 2 + Math.random() * (ceiling / 2), MAX_RETRY_WAIT_MS)
  }
}

/** No answer at all, or the gateway (or a proxy before it) could not serve the call for now. */
function worthRetrying(error: ChatAuthError): boolean {
  if (error.code === CLIENT_CODES.ABORTED) return false
  return error.statusCode === 0 || error.statusCode === 502 || error.statusCode === 503 || error.statusCode === 504
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
  if (isErrorBody(body)) return new ChatAuthError(body.statusCode, body.code, body.message, { retryAfter })
  return new ChatAuthError(response.status, CLIENT_CODES.UNEXPECTED_RESPONSE, `${call.method} ${url.pathname} answered ${response.status} without the gateway's error body`, { retryAfter })
}

function isErrorBody(body: unknown): body is { statusCode: number; code: string; message: string } {
  const candidate = body as { statusCode?: unknown; code?: unknown; message?: unknown } | undefined
  return typeof candidate?.statusCode === 'number' && typeof candidate.code === 'string' && typeof candidate.message === 'string'
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
