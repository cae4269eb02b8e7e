import { signatureHeaders } from './signature.js'

/** SPEC §9.3: an attempt that has not answered in 5 s has failed. */
export const ATTEMPT_TIMEOUT_MS = 5000

export interface Attempt {
  /** a 2xx came back */
  delivered: boolean
  /** the answer's status; null when none came */
  status: number | null
  /** why it failed, for the deliveries listing (never the body, never the secret) */
  error: string | null
  /** the node is closing: the attempt was cut short and says nothing about the receiver */
  interrupted: boolean
}

/**
 * One POST of one event to one endpoint, signed. Redirects are not followed: a 3xx is a
 * failure like any other non-2xx (following one would send the signed event to a place the
 * endpoint's owner did not register). The answer's body is never read.
 */
export async function sendAttempt(
  endpoint: { url: string; secret: string },
  delivery: { eventId: string; payload: string },
  options: { stop: AbortSignal; timeoutMs?: number; now?: () => number },
): Promise<Attempt> {
  const timeoutMs = options.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  const timestamp = Math.floor((options.now ?? Date.now)() / 1000)
  const headers = { 'content-type': 'application/json', 'user-agent': 'chat-auth-gateway-webhooks', ...signatureHeaders(endpoint.secret, delivery.eventId, timestamp, delivery.payload) }
  const timeout = AbortSignal.timeout(timeoutMs)
  try {
    const response = await fetch(endpoint.url, { method: 'POST', headers, body: delivery.payload, redirect: 'manual', signal: AbortSignal.any([options.stop, timeout]) })
    await response.body?.cancel().catch(() => {})
    const delivered = response.status >= 200 && response.status < 300
    return { delivered, status: response.status, error: delivered ? null : `answered ${response.status}`, interrupted: false }
  } catch (error) {
    if (options.stop.aborted) return { delivered: false, status: null, error: 'the node closed during the attempt', interrupted: true }
    if (timeout.aborted) return { delivered: false, status: null, error: `no answer within ${timeoutMs / 1000} s`, interrupted: false }
    return { delivered: false, status: null, error: describe(error), interrupted: false }
  }
}

// fetch says only "fetch failed"; its cause names what happened (ECONNREFUSED, a TLS error…).
function describe(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown; message?: unknown } } | null)?.cause
  if (typeof cause?.code === 'string') return `could not connect: ${cause.code}`
  if (typeof cause?.message === 'string') return cause.message.slice(0, 200)
  return error instanceof Error ? error.message.slice(0, 200) : 'the request failed'
}
