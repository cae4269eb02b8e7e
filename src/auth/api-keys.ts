import { hash, randomBytes, timingSafeEqual } from 'node:crypto'

const SECRET_BYTES = 32

/** A new key: the public id and the secret that is shown once and stored only as a hash. */
export function generateApiKey(): { keyId: string; keySecret: string; secretHash: Buffer } {
  const keyId = 'ak_' + randomBytes(12).toString('base64url')
  const keySecret = 'sk_' + randomBytes(SECRET_BYTES).toString('base64url')
  return { keyId, keySecret, secretHash: hashSecret(keySecret) }
}

/** Key ids are visible ASCII; anything else cannot name a key (and is "not found"). */
export function looksLikeKeyId(keyId: string): boolean {
  return keyId.length <= 128 && /^[\x21-\x7e]+$/.test(keyId)
}

/** SHA-256: the secret is 256 random bits, so a slow password hash would only cost throughput. */
export function hashSecret(secret: string): Buffer {
  // One-shot hashing: this runs on every token and invalidation request.
  return hash('sha256', secret, 'buffer') as unknown as Buffer
}

/** Constant-time in the secret: both sides are 32-byte digests. */
export function secretMatches(secretHash: Buffer | undefined, secret: string): boolean {
  const candidate = hashSecret(secret)
  // Without a key the comparison still runs, against the candidate itself, and is discarded.
  const expected = secretHash ?? candidate
  return candidate.length === expected.length && timingSafeEqual(candidate, expected) && secretHash !== undefined
}
