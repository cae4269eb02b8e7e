import { ChatAuthError, CLIENT_CODES } from './errors.js'

/**
 * What the client takes of an answer. Never a redirect: the gateway sends none, so one comes
 * from something in between (a misconfigured load balancer or ingress), and following it
 * would send the call elsewhere — the API key's secret in its body, or, after a 302 or 303,
 * a write turned into a GET that "succeeds" where the gateway never sees it. And never more
 * than `maxResponseBytes` of a body: whoever answers cannot make the caller hold more.
 */

/** The body of `response` as text, or a ChatAuthError: REDIRECT_REFUSED, RESPONSE_TOO_LARGE. */
export async function answerText(response: Response, maxBytes: number, call: string): Promise<string> {
  const refused = redirectRefusal(response, call)
  if (refused !== undefined) {
    await discard(response)
    throw refused
  }
  const declared = declaredLength(response)
  if (declared !== undefined && declared > maxBytes) {
    await discard(response)
    throw tooLarge(response.status, call, maxBytes, `of ${declared} bytes (its Content-Length), more`)
  }
  return await readAtMost(response, maxBytes, call)
}

function redirectRefusal(response: Response, call: string): ChatAuthError | undefined {
  const hint = 'point baseUrl at the gateway itself'
  // A browser's fetch with redirect 'manual' hides the redirect: status 0, no headers.
  if (response.type === 'opaqueredirect') return new ChatAuthError(0, CLIENT_CODES.REDIRECT_REFUSED, `${call} answered with a redirect, which the client never follows (the browser does not say where to); ${hint}`)
  // A fetch given as an option that followed one all the same: its answer is not the gateway's.
  if (response.redirected) return new ChatAuthError(response.status, CLIENT_CODES.REDIRECT_REFUSED, `${call} was redirected to ${quoted(response.url)} by the fetch the client was given, which must not follow redirects; ${hint}`)
  if (response.status < 300 || response.status > 399) return undefined
  const location = response.headers.get('location')
  const where = location === null ? 'a redirect without a Location' : `a redirect to ${quoted(location)}`
  return new ChatAuthError(response.status, CLIENT_CODES.REDIRECT_REFUSED, `${call} answered ${response.status}, ${where}, which the client never follows (it would send the call elsewhere); ${hint}`)
}

/** The body's length as sent, where it is also what will be read (no content coding). */
function declaredLength(response: Response): number | undefined {
  const coding = response.headers.get('content-encoding')
  if (coding !== null && coding.trim().toLowerCase() !== 'identity') return undefined
  const length = response.headers.get('content-length')
  return length !== null && /^\d+$/.test(length.trim()) ? Number(length) : undefined
}

/** Reads chunk by chunk, counting, and hangs up once past `maxBytes` (after decompression). */
async function readAtMost(response: Response, maxBytes: number, call: string): Promise<string> {
  if (response.body === null) return ''
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > maxBytes) {
      await reader.cancel().catch(() => {})
      throw tooLarge(response.status, call, maxBytes, 'longer')
    }
    chunks.push(value)
  }
  const whole = new Uint8Array(size)
  let at = 0
  for (const chunk of chunks) {
    whole.set(chunk, at)
    at += chunk.byteLength
  }
  return new TextDecoder().decode(whole)
}

/** Lets the connection go without reading what is left. */
async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => {})
}

/** `body`: "longer", or "of N bytes (its Content-Length), more" */
function tooLarge(status: number, call: string, maxBytes: number, body: string): ChatAuthError {
  return new ChatAuthError(status, CLIENT_CODES.RESPONSE_TOO_LARGE, `${call} answered ${status} with a body ${body} than the client reads, ${maxBytes} bytes (the client option maxResponseBytes): not read`)
}

/** A URL from an answer, quoted and cut short: it is someone else's text. */
function quoted(text: string): string {
  return JSON.stringify(text.length > 300 ? `${text.slice(0, 300)}…` : text)
}
