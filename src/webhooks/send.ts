import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import { isIP } from 'node:net'
import { signatureHeaders } from './signature.js'
import { DestinationRefused, hostOf, type Destinations } from './destinations.js'

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

// A new connection per attempt: a kept-alive one that the receiver closes as it is reused
// would fail an attempt, and pause the endpoint, for nothing the receiver did wrong.
const agents = { 'http:': new HttpAgent({ keepAlive: false }), 'https:': new HttpsAgent({ keepAlive: false }) }

/**
 * One POST of one event to one endpoint, signed, to an address `destinations` allows: a
 * literal host is checked here, a name by `destinations.lookup`, which net.connect calls
 * and which hands it only the addresses it checked. node:http rather than fetch: fetch takes
 * no lookup of ours. Redirects are not followed (node:http never does): a 3xx is a failure
 * like any other non-2xx (following one would send the signed event to a place the
 * endpoint's owner did not register). The answer's body is never read.
 */
export async function sendAttempt(
  endpoint: { url: string; secret: string },
  delivery: { eventId: string; payload: string },
  options: { stop: AbortSignal; destinations: Destinations; timeoutMs?: number; now?: () => number },
): Promise<Attempt> {
  const timeoutMs = options.timeoutMs ?? ATTEMPT_TIMEOUT_MS
  const timestamp = Math.floor((options.now ?? Date.now)() / 1000)
  const body = Buffer.from(delivery.payload)
  const headers = {
    'content-type': 'application/json',
    'content-length': String(body.length),
    'user-agent': 'chat-auth-gateway-webhooks',
    ...signatureHeaders(endpoint.secret, delivery.eventId, timestamp, delivery.payload),
  }
  const timeout = AbortSignal.timeout(timeoutMs)
  try {
    const url = new URL(endpoint.url)
    const host = hostOf(url)
    if (isIP(host) !== 0) {
      const refused = options.destinations.addressRefusal(host)
      if (refused !== undefined) throw new DestinationRefused(refused)
    }
    const status = await post(url, headers, body, options.destinations, AbortSignal.any([options.stop, timeout]))
    const delivered = status >= 200 && status < 300
    return { delivered, status, error: delivered ? null : `answered ${status}`, interrupted: false }
  } catch (error) {
    if (options.stop.aborted) return { delivered: false, status: null, error: 'the node closed during the attempt', interrupted: true }
    if (error instanceof DestinationRefused) return { delivered: false, status: null, error: error.message, interrupted: false }
    if (timeout.aborted) return { delivered: false, status: null, error: `no answer within ${timeoutMs / 1000} s`, interrupted: false }
    return { delivered: false, status: null, error: describe(error), interrupted: false }
  }
}

/** The status of the answer to one POST; the answer's body is dropped unread. */
function post(url: URL, headers: Record<string, string>, body: Buffer, destinations: Destinations, signal: AbortSignal): Promise<number> {
  const https = url.protocol === 'https:'
  return new Promise((resolve, reject) => {
    const request = (https ? httpsRequest : httpRequest)(url, { method: 'POST', headers, agent: agents[https ? 'https:' : 'http:'], lookup: destinations.lookup, signal }, (response: IncomingMessage) => {
      resolve(response.statusCode ?? 0)
      response.destroy()
    })
    request.on('error', reject)
    request.end(body)
  })
}

// What the connection said (ECONNREFUSED, ENOTFOUND, a TLS error…), never more than a line.
function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === 'string' && code !== 'ABORT_ERR') return `could not connect: ${code}`
  return error instanceof Error ? error.message.slice(0, 200) : 'the request failed'
}
