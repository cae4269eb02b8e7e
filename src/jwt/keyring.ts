import { createHash, createHmac, createSecretKey, hash, randomBytes, type JsonWebKey } from 'node:crypto'
import { createSigner, createVerifier } from 'fast-jwt'
import { LRUCache } from 'lru-cache'
import { ConfigError, type JwtAlgorithm, type JwtConfig, type JwtKeyConfig } from '../config.js'
import { asymmetricKey } from './key-material.js'
import { claimsJson } from './claims-json.js'

/** The claims this service signs; see SPEC §3.1. */
export interface SignedClaims {
  sub: string
  tokenVersion: number
  companyId: string
  agentId: string
  iat: number
  exp: number
  jti: string
  /** private: the tokens generations of the company and the agent (see domain.ts) */
  cgen?: number
  agen?: number
  iss?: string
  aud?: string
}

export interface PublicJwk extends JsonWebKey {
  kid: string
  alg: JwtAlgorithm
  use: 'sig'
}

/**
 * The signing key and every verifying key, built once at boot. The hot path reads the
 * token's `kid`, picks that key's verifier (which allows exactly that key's algorithm,
 * so `none` and algorithm confusion never verify) and runs it. The claims of a token that
 * verified are remembered here, in an LRU keyed by the token's SHA-256 (`createKeyring`):
 * one cache for every algorithm; fast-jwt's own is off (`cache: false` in `buildKey`).
 */
export interface Keyring {
  readonly signingKid: string
  /** the kid of every key that verifies, the signing one first */
  readonly kids: readonly string[]
  sign(claims: SignedClaims): string
  /** The verified claims, or undefined for any token that is not ours and intact. */
  verify(token: string): Record<string, unknown> | undefined
  jwks(): { keys: PublicJwk[] }
}

/** The name under which a generated HS256 key is kept in the store. */
export const GENERATED_KEY_NAME = 'jwt-hs256-key'

export function generateHs256Secret(): string {
  return randomBytes(48).toString('base64url')
}

const MAX_TOKEN_LENGTH = 8192
/** Verified tokens remembered: the working set of busy clients, a few MB of heap. */
const VERIFIED_CACHE_SIZE = 20_000

interface BuiltKey {
  kid: string
  alg: JwtAlgorithm
  verify: (token: string) => Record<string, unknown>
  jwk: PublicJwk | undefined
  signingMaterial: string | undefined
}

export function createKeyring(config: JwtConfig, keys: JwtKeyConfig[]): Keyring {
  if (keys.length === 0) throw new ConfigError('JWT_SECRET', 'no JWT key configured')
  const built = keys.map((key, index) => buildKey(key, index, config))
  const byKid = new Map<string, BuiltKey>()
  for (const key of built) {
    if (byKid.has(key.kid)) throw new ConfigError('JWT_KEYS', `two keys share the kid "${key.kid}"`)
    byKid.set(key.kid, key)
  }
  const signing = built[0]!
  const signer = signing.alg === 'HS256' ? hs256Signer(signing.signingMaterial!, signing.kid) : createSigner({ key: signing.signingMaterial!, algorithm: signing.alg, kid: signing.kid })
  // A token's header segment repeats for every token of a key; remember which key it names.
  const keyByHeader = new Map<string, BuiltKey>()
  // Claims of tokens that verified, keyed by a SHA-256 of the token (never the token):
  // one-shot hashing costs ~1 µs where an HMAC check costs ~8 µs and an ES256 one ~100 µs.
  // Expiry and everything else are still checked on every request by the caller.
  const verified = new LRUCache<string, Record<string, unknown>>({ max: VERIFIED_CACHE_SIZE })

  return {
    signingKid: signing.kid,
    kids: built.map((key) => key.kid),
    sign: (claims) => signer(claims),
    verify(token) {
      if (token.length > MAX_TOKEN_LENGTH) return undefined
      const digest = hash('sha256', token, 'base64')
      const known = verified.get(digest)
      if (known !== undefined) return known
      const dot = token.indexOf('.')
      if (dot <= 0) return undefined
      const header = token.slice(0, dot)
      let key = keyByHeader.get(header)
      if (key === undefined) {
        key = keyForHeader(header, byKid)
        if (key === undefined) return undefined
        if (keyByHeader.size < 256) keyByHeader.set(header, key)
      }
      let claims: Record<string, unknown>
      try {
        claims = key.verify(token)
      } catch {
        return undefined
      }
      verified.set(digest, claims)
      return claims
    },
    jwks: () => ({ keys: built.flatMap((key) => (key.jwk ? [key.jwk] : [])) }),
  }
}

/**
 * HS256 signing with everything fixed built once: the header segment never changes, so a
 * token is its claims' JSON (claims-json.ts), one base64url and one HMAC. (fast-jwt's
 * general signer rebuilds the header on every call: a tenth of a token request's CPU in
 * the profile.)
 * Every token is still verified by fast-jwt, which the tests exercise on each one.
 */
function hs256Signer(secret: string, kid: string): (claims: SignedClaims) => string {
  const header = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid })).toString('base64url') + '.'
  // the secret's UTF-8 bytes imported once: a string key is imported again by every HMAC
  const key = createSecretKey(Buffer.from(secret, 'utf8'))
  return (claims) => {
    const input = header + Buffer.from(claimsJson(claims)).toString('base64url')
    return input + '.' + createHmac('sha256', key).update(input).digest('base64url')
  }
}

function keyForHeader(segment: string, byKid: Map<string, BuiltKey>): BuiltKey | undefined {
  const { kid, alg } = headerOf(segment)
  if (typeof kid !== 'string') return undefined
  const key = byKid.get(kid)
  return key !== undefined && key.alg === alg ? key : undefined
}

/** The `kid` a token's header names, unverified: undefined when it names none. */
export function claimedKid(token: string): string | undefined {
  const dot = token.indexOf('.')
  if (dot <= 0) return undefined
  const { kid } = headerOf(token.slice(0, dot))
  return typeof kid === 'string' ? kid : undefined
}

function headerOf(segment: string): { kid?: unknown; alg?: unknown } {
  let header: unknown
  try {
    header = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'))
  } catch {
    return {}
  }
  return typeof header === 'object' && header !== null ? (header as { kid?: unknown; alg?: unknown }) : {}
}

function buildKey(key: JwtKeyConfig, index: number, config: JwtConfig): BuiltKey {
  const variable = index === 0 && key.secret !== undefined ? 'JWT_SECRET' : key.privateKey !== undefined ? 'JWT_PRIVATE_KEY' : 'JWT_KEYS'
  const verifierOptions = {
    algorithms: [key.alg],
    // The keyring keeps its own cache of verified claims, for every algorithm.
    cache: false,
    // Expiry is checked by the verifier of SPEC §3.3 after the claims are known to be well-formed.
    ignoreExpiration: true,
    ignoreNotBefore: false,
    ...(config.issuer !== undefined ? { allowedIss: config.issuer } : {}),
    ...(config.audience !== undefined ? { allowedAud: config.audience } : {}),
    // allowedIss/allowedAud only check the claim when present: configured means required.
    requiredClaims: [...(config.issuer !== undefined ? ['iss'] : []), ...(config.audience !== undefined ? ['aud'] : [])],
  }

  if (key.alg === 'HS256') {
    const secret = key.secret!
    const kid = key.kid ?? 'hs-' + createHash('sha256').update('chat-auth kid\0').update(secret).digest('base64url').slice(0, 16)
    return { kid, alg: 'HS256', verify: createVerifier({ ...verifierOptions, key: secret }), jwk: undefined, signingMaterial: secret }
  }

  const { publicKey, privateKey } = asymmetricKey(key, variable, `key ${index}`)
  const privatePem = privateKey?.export({ format: 'pem', type: 'pkcs8' }).toString()
  const jwk = publicKey.export({ format: 'jwk' })
  const kid = key.kid ?? thumbprint(jwk)
  const publicPem = publicKey.export({ format: 'pem', type: 'spki' }).toString()
  return {
    kid,
    alg: key.alg,
    verify: createVerifier({ ...verifierOptions, key: publicPem }),
    jwk: { ...jwk, kid, alg: key.alg, use: 'sig' },
    signingMaterial: privatePem,
  }
}

/** RFC 7638 JWK thumbprint: the same key gives the same kid on every node. */
function thumbprint(jwk: JsonWebKey): string {
  const required: Record<string, string[]> = { EC: ['crv', 'kty', 'x', 'y'], OKP: ['crv', 'kty', 'x'], RSA: ['e', 'kty', 'n'] }
  const members = required[jwk.kty as string] ?? []
  const canonical = JSON.stringify(Object.fromEntries(members.map((name) => [name, (jwk as Record<string, unknown>)[name]])))
  return createHash('sha256').update(canonical).digest('base64url')
}
