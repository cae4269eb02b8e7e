/**
 * HTTP Basic `keyId:keySecret` (RFC 7617), the API key as the event stream (SPEC §8.2) and
 * the OAuth endpoints (SPEC §9) take it. Anything else is a pair no key has: the same 401,
 * counted as a failure (SPEC §7.3). Bounded like the JSON fields: an id over 128 characters
 * or a secret over 256 is no key's either.
 */
export interface ApiKeyPair {
  keyId: string
  keySecret: string
}

const NO_KEY: ApiKeyPair = { keyId: '', keySecret: '' }

export const MAX_KEY_ID = 128
export const MAX_KEY_SECRET = 256

export function basicCredentials(header: string | undefined): ApiKeyPair {
  const decoded = basicUserPass(header)
  if (decoded === undefined) return NO_KEY
  return bounded(decoded.user, decoded.pass)
}

/** The user and password of an `Authorization: Basic …` header, undefined when it is not one. */
export function basicUserPass(header: string | undefined): { user: string; pass: string } | undefined {
  const match = header === undefined ? null : /^Basic +([A-Za-z0-9+/=]{1,1024})$/i.exec(header)
  if (match === null) return undefined
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8')
  const colon = decoded.indexOf(':')
  if (colon < 1) return undefined
  return { user: decoded.slice(0, colon), pass: decoded.slice(colon + 1) }
}

/** A pair within the bounds, or the pair no key has. */
export function bounded(keyId: string, keySecret: string): ApiKeyPair {
  if (keyId.length === 0 || keyId.length > MAX_KEY_ID || keySecret.length > MAX_KEY_SECRET) return NO_KEY
  return { keyId, keySecret }
}
