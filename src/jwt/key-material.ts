import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { ConfigError, JWT_ALGORITHMS, type JwtAlgorithm, type JwtKeyConfig } from '../config/types.js'

/** The variables that may carry key material; at most one of them is set. */
const SOURCES = ['JWT_SECRET', 'JWT_PRIVATE_KEY', 'JWT_PRIVATE_KEY_FILE', 'JWT_KEYS', 'JWT_KEYS_FILE'] as const

export type KeySources = Record<(typeof SOURCES)[number], string | undefined>

export const MIN_SECRET_BYTES = 32

/**
 * The keys the environment configures, each checked to be usable for its algorithm, so
 * that a bad key stops the boot before any store is touched. `algorithm` is JWT_ALGORITHM
 * when it is set. Empty: no key configured (an HS256 key is generated and kept in the store).
 */
export function configuredKeys(sources: KeySources, algorithm: JwtAlgorithm | undefined): JwtKeyConfig[] {
  const given = SOURCES.filter((name) => sources[name] !== undefined)
  if (given.length > 1) throw new ConfigError(given[1]!, `set only one of ${SOURCES.join(', ')}; ${given.join(' and ')} are both set`)
  const alg = algorithm ?? 'HS256'

  const secret = sources.JWT_SECRET
  if (secret !== undefined) {
    if (alg !== 'HS256') throw new ConfigError('JWT_ALGORITHM', 'JWT_SECRET is an HS256 secret; use JWT_PRIVATE_KEY for ' + alg)
    return [checkKey('JWT_SECRET', { alg: 'HS256', secret })]
  }

  const privateKey = sources.JWT_PRIVATE_KEY ?? fileContent('JWT_PRIVATE_KEY_FILE', sources.JWT_PRIVATE_KEY_FILE)
  if (privateKey !== undefined) {
    if (alg === 'HS256') throw new ConfigError('JWT_ALGORITHM', 'a private key needs ES256, EdDSA or RS256')
    return [checkKey('JWT_PRIVATE_KEY', { alg, privateKey: privateKey.replace(/\\n/g, '\n') })]
  }

  const keysJson = sources.JWT_KEYS ?? fileContent('JWT_KEYS_FILE', sources.JWT_KEYS_FILE)
  if (keysJson !== undefined) return keysFromJson(sources.JWT_KEYS !== undefined ? 'JWT_KEYS' : 'JWT_KEYS_FILE', keysJson)

  // Only HS256 keys are ever generated: another algorithm without its key is a mistake, not a default.
  if (algorithm !== undefined && algorithm !== 'HS256') {
    throw new ConfigError('JWT_ALGORITHM', `${algorithm} needs its private key in JWT_PRIVATE_KEY, JWT_PRIVATE_KEY_FILE or JWT_KEYS; without a key only HS256 is generated`)
  }
  return []
}

/** JWT_KEYS: a non-empty JSON array of `{alg, secret | privateKey | publicKey, kid?}`; the first signs. */
function keysFromJson(variable: string, json: string): JwtKeyConfig[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    throw new ConfigError(variable, 'not valid JSON')
  }
  if (!Array.isArray(parsed) || parsed.length === 0) throw new ConfigError(variable, 'expected a non-empty JSON array of keys')
  const keys = parsed.map((entry, index) => keyFromJson(variable, index, entry))
  if (keys[0]!.publicKey !== undefined) throw new ConfigError(variable, 'the first key signs, so it needs a secret or a privateKey')
  return keys
}

function keyFromJson(variable: string, index: number, entry: unknown): JwtKeyConfig {
  const where = `${variable}[${index}]`
  if (typeof entry !== 'object' || entry === null) throw new ConfigError(variable, `${where} is not an object`)
  const record = entry as Record<string, unknown>
  const alg = record.alg ?? 'HS256'
  if (typeof alg !== 'string' || !(JWT_ALGORITHMS as readonly string[]).includes(alg)) {
    throw new ConfigError(variable, `${where}.alg must be one of ${JWT_ALGORITHMS.join(', ')}`)
  }
  const key: JwtKeyConfig = { alg: alg as JwtAlgorithm }
  for (const field of ['kid', 'secret', 'privateKey', 'publicKey'] as const) {
    const value = record[field]
    if (value === undefined) continue
    if (typeof value !== 'string' || value === '') throw new ConfigError(variable, `${where}.${field} must be a non-empty string`)
    key[field] = value
  }
  const materials = [key.secret, key.privateKey, key.publicKey].filter((v) => v !== undefined).length
  if (materials !== 1) throw new ConfigError(variable, `${where} needs exactly one of secret, privateKey, publicKey`)
  if ((key.alg === 'HS256') !== (key.secret !== undefined)) {
    throw new ConfigError(variable, `${where}: HS256 takes a secret, ${key.alg === 'HS256' ? 'not a PEM key' : key.alg + ' takes a PEM key'}`)
  }
  return checkKey(where, key, variable)
}

function checkKey(where: string, key: JwtKeyConfig, variable = where): JwtKeyConfig {
  if (key.secret !== undefined && Buffer.byteLength(key.secret) < MIN_SECRET_BYTES) {
    throw new ConfigError(variable, `${where === variable ? 'the secret' : where + '.secret'} must be at least ${MIN_SECRET_BYTES} bytes`)
  }
  if (key.alg !== 'HS256') asymmetricKey(key, variable, where === variable ? 'the key' : where)
  return key
}

const KEY_TYPES: Record<Exclude<JwtAlgorithm, 'HS256'>, { type: string; curve?: string }> = {
  ES256: { type: 'ec', curve: 'prime256v1' },
  EdDSA: { type: 'ed25519' },
  RS256: { type: 'rsa' },
}

/** The key objects of an asymmetric key, checked to be readable and of its algorithm's type. */
export function asymmetricKey(key: JwtKeyConfig, variable: string, label: string): { publicKey: KeyObject; privateKey: KeyObject | undefined } {
  let publicKey: KeyObject
  let privateKey: KeyObject | undefined
  try {
    if (key.privateKey !== undefined) {
      privateKey = createPrivateKey(key.privateKey)
      publicKey = createPublicKey(privateKey)
    } else {
      publicKey = createPublicKey(key.publicKey ?? '')
    }
  } catch (error) {
    throw new ConfigError(variable, `${label} is not a readable PEM key: ${(error as Error).message}`)
  }
  const expected = KEY_TYPES[key.alg as Exclude<JwtAlgorithm, 'HS256'>]
  const curve = publicKey.asymmetricKeyDetails?.namedCurve
  if (publicKey.asymmetricKeyType !== expected.type || (expected.curve !== undefined && curve !== expected.curve)) {
    throw new ConfigError(variable, `${label} is a ${publicKey.asymmetricKeyType}${curve ? ' ' + curve : ''} key, not one for ${key.alg}`)
  }
  return { publicKey, privateKey }
}

function fileContent(variable: string, path: string | undefined): string | undefined {
  if (path === undefined) return undefined
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError(variable, `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`)
  }
}
