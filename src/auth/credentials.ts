import { errors } from '../errors.js'
import type { Gateway } from '../gateway.js'
import type { ApiKeyState } from '../store/store.js'
import { secretMatches } from './api-keys.js'

/**
 * SPEC §3.1 step 1: an unknown key id, a wrong secret and a revoked key all answer the
 * same 401, so a caller learns nothing about which key ids exist.
 */
export async function authenticateApiKey(gateway: Gateway, keyId: string, keySecret: string): Promise<ApiKeyState> {
  const key = await gateway.states.apiKey(keyId)
  if (key === undefined || !secretMatches(key, keySecret) || key.revoked) throw errors.invalidApiCredentials()
  gateway.noteApiKeyUsed(keyId)
  return key
}
