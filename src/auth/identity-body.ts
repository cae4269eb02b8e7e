import type { Identity } from './verify.js'

/** The verify endpoint's 200 body for an identity; also what an open chat session's `identity` is. */
export function identityBody(identity: Identity) {
  return {
    user: identity.user,
    agent: identity.agent,
    tokenVersion: identity.tokenVersion,
    expiresAt: isoSeconds(identity.exp),
  }
}

export type IdentityBody = ReturnType<typeof identityBody>

// Tokens issued in the same second share their expiry: format each second once.
let lastSeconds = Number.NaN
let lastIso = ''
/** An expiry (seconds since the epoch) as ISO 8601, as every answer writes it. */
export function isoSeconds(seconds: number): string {
  if (seconds !== lastSeconds) {
    lastIso = new Date(seconds * 1000).toISOString()
    lastSeconds = seconds
  }
  return lastIso
}
