import { errors } from '../errors.js'
import type { ApiKeyState } from '../domain.js'
import type { MaybePromise } from '../cache/states.js'
import { secretMatches } from './api-keys.js'

/** Resolves to the key a (key id, secret) pair names, or rejects with the SPEC's 401. */
export type AuthenticateApiKey = (keyId: string, keySecret: string) => Promise<ApiKeyState>

export interface ApiKeyAuthenticationOptions {
  /** the key's current state (cached on the node) */
  findKey(keyId: string): MaybePromise<ApiKeyState | undefined>
  /** records that a key was used (written to the store in batches) */
  noteUsed(keyId: string): void
}

/**
 * SPEC §3.1 step 1: an unknown key id, a wrong secret and a revoked key all answer the
 * same 401, so a caller learns nothing about which key ids exist.
 */
export function createApiKeyAuthentication({ findKey, noteUsed }: ApiKeyAuthenticationOptions): AuthenticateApiKey {
  return async (keyId, keySecret) => {
    const key = await findKey(keyId)
    if (key === undefined || !secretMatches(key, keySecret) || key.revoked) throw errors.invalidApiCredentials()
    noteUsed(keyId)
    return key
  }
}
