import { errors } from '../errors.js'
import type { ApiKeyState } from '../domain.js'
import type { MaybePromise } from '../maybe-promise.js'
import { secretMatches } from './api-keys.js'

/**
 * The key a (key id, secret) pair names (a value when the key is cached and the secret
 * matches), or a promise that rejects with the SPEC's 401.
 */
export type AuthenticateApiKey = (keyId: string, keySecret: string) => MaybePromise<ApiKeyState>

export interface ApiKeyAuthenticationOptions {
  /** the key's current state: a value when cached on the node, a promise of a store read otherwise */
  findKey(keyId: string): MaybePromise<ApiKeyState | undefined>
  /** the key's state read from the store (the read `findKey` makes on a miss) */
  readKey(keyId: string): Promise<ApiKeyState | undefined>
  /** records that a key was used (written to the store in batches) */
  noteUsed(keyId: string): void
}

/**
 * SPEC §3.1 step 1: an unknown key id, a wrong secret and a revoked key all answer the
 * same 401, so a caller learns nothing about which key ids exist — not from the answer, and
 * not from its time (SPEC §7.3). Nothing caches a key id's absence, so an unknown one costs a
 * store read; a refusal decided from the cache pays for the same read before it answers.
 * Accepted keys, the callers that matter for throughput, still never leave the cache.
 */
export function createApiKeyAuthentication({ findKey, readKey, noteUsed }: ApiKeyAuthenticationOptions): AuthenticateApiKey {
  return (keyId, keySecret) => {
    const found = findKey(keyId)
    return found instanceof Promise ? found.then((key) => decide(keyId, keySecret, key, true)) : decide(keyId, keySecret, found, false)
  }

  function decide(keyId: string, keySecret: string, key: ApiKeyState | undefined, wasRead: boolean): MaybePromise<ApiKeyState> {
    // The secret is hashed whether or not the key exists: no shortcut for unknown ids.
    const matches = secretMatches(key?.secretHash, keySecret)
    if (key !== undefined && matches && !key.revoked) {
      noteUsed(keyId)
      return key
    }
    const refused = () => Promise.reject(errors.invalidApiCredentials())
    return wasRead ? refused() : readKey(keyId).then(refused)
  }
}
