import http from 'node:http'
import { call } from '../../support/http-client.js'

/** A request the driver makes is given up after this long (then neither an accept nor a violation). */
export const REQUEST_TIMEOUT_MS = 3000

// Plain node:http with keep-alive: much lighter than fetch at 500 requests a second.
export const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })

/** GET with a bearer token over the shared keep-alive agent. */
export function get(port: number, path: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path, agent, headers: { authorization: `Bearer ${token}` }, timeout: REQUEST_TIMEOUT_MS }, (response) => {
      let body = ''
      response.setEncoding('utf8')
      response.on('data', (chunk) => (body += chunk))
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }))
      response.on('error', reject)
    })
    request.on('timeout', () => request.destroy(new Error('timeout')))
    request.on('error', reject)
  })
}

/** A verification's status on a node: 0 when it timed out or was refused (neither an accept nor a violation). */
export const verifyStatus = (port: number, token: string): Promise<number> => get(port, '/rest/v1/auth/verify', token).then((r) => r.status, () => 0)

export const claimsOf = (token: string): Record<string, any> => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString())
export const jtiOf = (token: string): string => claimsOf(token).jti
export const tokenVersion = (token: string): number => claimsOf(token).tokenVersion

export interface Credentials {
  keyId: string
  keySecret: string
}

/** RFC 7009 revocation with the API key as client credentials (HTTP Basic). */
export async function oauthRevoke(url: string, creds: Credentials, token: string): Promise<{ status: number }> {
  const response = await fetch(`${url}/oauth2/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${encodeURIComponent(creds.keyId)}:${encodeURIComponent(creds.keySecret)}`).toString('base64')}` },
    body: new URLSearchParams({ token }).toString(),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS * 3),
  })
  await response.arrayBuffer()
  return { status: response.status }
}

/** A token of `userId` issued through `url`; throws unless 200. */
export async function issue(url: string, creds: Credentials, userId: string): Promise<{ token: string; userId: string }> {
  const issued = await call(url, 'POST', '/rest/v1/auth/token', { ...creds, userId })
  if (issued.status !== 200) throw new Error(`token: ${issued.status} ${JSON.stringify(issued.body)}`)
  return { token: issued.body.token, userId: issued.body.user.id }
}

/** The sum of a metric's samples on a node (those whose labels contain `labels`, e.g. 'result="done"'); undefined when the node did not answer. */
export async function metric(url: string, name: string, labels = ''): Promise<number | undefined> {
  const answer = await call(url, 'GET', '/metrics').catch(() => undefined)
  if (answer?.status !== 200) return undefined
  let sum = 0
  for (const line of String(answer.body).split('\n')) {
    if (!(line.startsWith(name + ' ') || line.startsWith(name + '{')) || !line.includes(labels)) continue
    sum += Number(line.split(' ').pop())
  }
  return sum
}

/** The node answers /readyz with 200: it vouches for its caches. */
export const ready = (url: string): Promise<boolean> => call(url, 'GET', '/readyz').then((r) => r.status === 200, () => false)
