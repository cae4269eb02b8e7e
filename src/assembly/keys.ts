import { randomBytes, timingSafeEqual } from 'node:crypto'
import { hashSecret as sha256 } from '../auth/api-keys.js'
import type { Config, JwtKeyConfig } from '../config.js'
import { createKeyring, GENERATED_KEY_NAME, generateHs256Secret, type Keyring } from '../jwt/keyring.js'
import type { Store } from '../store/store.js'

const ADMIN_TOKEN_HASH_NAME = 'admin-token-sha256'

export interface Keys {
  keyring: Keyring
  /** the key material the keyring was made of (the bus derives its message keys from it) */
  jwtKeys: JwtKeyConfig[]
  /** the admin token, when this boot generated it (so it must be shown once) */
  generatedAdminToken: string | undefined
  adminTokenMatches(presented: string): boolean
  /** whether a SHA-256 of a token is this node's admin token's (a console session opened with it: SPEC §10.3) */
  adminTokenHashMatches(hash: Buffer): boolean
}

/** The JWT keys (configured, or generated once and kept in the store) and the admin token. */
export async function loadKeys(config: Config, store: Pick<Store, 'getOrCreateSecret'>): Promise<Keys> {
  const jwtKeys = config.jwt.keys.length ? config.jwt.keys : [{ alg: 'HS256' as const, secret: await store.getOrCreateSecret(GENERATED_KEY_NAME, generateHs256Secret()) }]
  const { adminTokenHash, generatedAdminToken } = await adminToken(config, store)
  return {
    keyring: createKeyring(config.jwt, jwtKeys),
    jwtKeys,
    generatedAdminToken,
    adminTokenMatches: (presented) => timingSafeEqual(sha256(presented), adminTokenHash),
    adminTokenHashMatches: (hash) => hash.length === adminTokenHash.length && timingSafeEqual(hash, adminTokenHash),
  }
}

/** Configured, or generated once and kept in the store as a hash: shown only by the boot that made it. */
async function adminToken(config: Config, store: Pick<Store, 'getOrCreateSecret'>): Promise<{ adminTokenHash: Buffer; generatedAdminToken: string | undefined }> {
  if (config.adminToken !== undefined) return { adminTokenHash: sha256(config.adminToken), generatedAdminToken: undefined }
  const candidate = 'adm_' + randomBytes(32).toString('base64url')
  const candidateHash = sha256(candidate).toString('hex')
  const storedHash = await store.getOrCreateSecret(ADMIN_TOKEN_HASH_NAME, candidateHash)
  return { adminTokenHash: Buffer.from(storedHash, 'hex'), generatedAdminToken: storedHash === candidateHash ? candidate : undefined }
}
