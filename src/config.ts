import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { resolve } from 'node:path'

/**
 * The whole configuration, read and checked once at boot. Nothing else in the
 * service reads `process.env`: everything downstream receives this object.
 */
export interface Config {
  port: number
  host: string
  dataDir: string
  databaseUrl: string | undefined
  /** how to reach Redis (REDIS_URL, or REDIS_SENTINELS + REDIS_SENTINEL_NAME); undefined: one node, no bus */
  redis: RedisConnection | undefined
  /** undefined → generated at boot and printed once */
  adminToken: string | undefined
  jwt: JwtConfig
  tokenMaxTtlSeconds: number
  logLevel: LogLevel
  bodyLimitBytes: number
  /** users, agents and API keys each held in an LRU of this many entries */
  cacheSize: number
  /** audit events older than this many days are pruned (EVENT_RETENTION_DAYS) */
  eventRetentionDays: number
  /** how long a node trusts its cache after the channel last proved itself alive */
  leaseMs: number
  /** users read into the cache at start, before /readyz answers 200 (0: none) */
  warmUpUsers: number
  /** first run on an empty store creates a demo company, agent and key */
  seedDemo: boolean
  /** channel and key prefix on Redis; the nodes of one deployment share it */
  redisPrefix: string
  /** timeouts and caps on connections, and the failed-credential limit (SPEC §7.3) */
  limits: LimitsConfig
}

/** One Redis server named by URL (`redis://`, `rediss://` for TLS; user and password in it). */
export interface RedisUrlConnection {
  kind: 'url'
  url: string
}

export interface SentinelAddress {
  host: string
  port: number
}

/** The primary that Redis Sentinel names, found through the sentinels, and followed through failovers. */
export interface RedisSentinelConnection {
  kind: 'sentinel'
  sentinels: SentinelAddress[]
  /** the master name the sentinels monitor (`sentinel monitor <name> …`) */
  name: string
  sentinelUsername: string | undefined
  sentinelPassword: string | undefined
  /** ACL user and password of the data nodes (primary and replicas) */
  username: string | undefined
  password: string | undefined
  /** TLS to the sentinels and the data nodes */
  tls: boolean
}

export type RedisConnection = RedisUrlConnection | RedisSentinelConnection

export interface LimitsConfig {
  /** the longest a client may take to send one whole request (headers and body) */
  requestTimeoutMs: number
  /** the longest it may take to send the headers; at most requestTimeoutMs */
  headersTimeoutMs: number
  /** how long an idle keep-alive connection stays open between requests */
  keepAliveTimeoutMs: number
  /** open connections per node; more are closed on arrival (0: unlimited) */
  maxConnections: number
  /** requests on one connection before it is closed (0: unlimited) */
  maxRequestsPerSocket: number
  /** failed credentials per minute per client address and per keyId (0: no limit) */
  authFailureLimit: number
  /** proxies whose X-Forwarded-For names the client: addresses, CIDRs, loopback/linklocal/uniquelocal */
  trustProxy: string[]
}

export type JwtAlgorithm = 'HS256' | 'ES256' | 'EdDSA' | 'RS256'
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'

/** One signing or verifying key as configured; `kid` is derived when absent. */
export interface JwtKeyConfig {
  alg: JwtAlgorithm
  kid?: string
  /** HS256 shared secret */
  secret?: string
  /** PEM private key (signs; its public half verifies) */
  privateKey?: string
  /** PEM public key (verifies only: a retired asymmetric key) */
  publicKey?: string
}

export interface JwtConfig {
  /** first key signs, all verify; empty → a generated HS256 key kept in the store */
  keys: JwtKeyConfig[]
  issuer: string | undefined
  audience: string | undefined
  clockToleranceSeconds: number
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`)
    this.name = 'ConfigError'
  }
}

type Env = Record<string, string | undefined>

const ALGORITHMS: readonly JwtAlgorithm[] = ['HS256', 'ES256', 'EdDSA', 'RS256']
const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']
const MIN_SECRET_BYTES = 32

/** The variables this service reads; docker-compose and the README are checked against it. */
export const CONFIG_VARIABLES = [
  'PORT',
  'HOST',
  'DATA_DIR',
  'DATABASE_URL',
  'REDIS_URL',
  'REDIS_SENTINELS',
  'REDIS_SENTINEL_NAME',
  'REDIS_SENTINEL_USERNAME',
  'REDIS_SENTINEL_PASSWORD',
  'REDIS_USERNAME',
  'REDIS_PASSWORD',
  'REDIS_TLS',
  'ADMIN_TOKEN',
  'JWT_SECRET',
  'JWT_ALGORITHM',
  'JWT_PRIVATE_KEY',
  'JWT_PRIVATE_KEY_FILE',
  'JWT_KEYS',
  'JWT_KEYS_FILE',
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'JWT_CLOCK_TOLERANCE',
  'TOKEN_MAX_TTL',
  'LOG_LEVEL',
  'BODY_LIMIT',
  'CACHE_SIZE',
  'CACHE_LEASE_MS',
  'WARM_UP_USERS',
  'EVENT_RETENTION_DAYS',
  'SEED_DEMO',
  'REDIS_PREFIX',
  'REQUEST_TIMEOUT',
  'HEADERS_TIMEOUT',
  'KEEP_ALIVE_TIMEOUT',
  'MAX_CONNECTIONS',
  'MAX_REQUESTS_PER_SOCKET',
  'AUTH_FAILURE_LIMIT',
  'TRUST_PROXY',
] as const

export function loadConfig(env: Env = process.env): Config {
  const read = (name: (typeof CONFIG_VARIABLES)[number]): string | undefined => {
    const value = env[name]
    return value === undefined || value.trim() === '' ? undefined : value.trim()
  }

  const config: Config = {
    port: integer('PORT', read('PORT'), 3000, 0, 65535),
    host: read('HOST') ?? '127.0.0.1',
    dataDir: dataDir(read('DATA_DIR') ?? './data'),
    databaseUrl: url('DATABASE_URL', read('DATABASE_URL'), ['postgres:', 'postgresql:']),
    redis: redisConnection(read),
    adminToken: adminToken(read('ADMIN_TOKEN')),
    jwt: {
      keys: jwtKeys(read),
      issuer: read('JWT_ISSUER'),
      audience: read('JWT_AUDIENCE'),
      clockToleranceSeconds: integer('JWT_CLOCK_TOLERANCE', read('JWT_CLOCK_TOLERANCE'), 0, 0, 3600),
    },
    tokenMaxTtlSeconds: tokenMaxTtl(read('TOKEN_MAX_TTL') ?? '30d'),
    logLevel: oneOf('LOG_LEVEL', read('LOG_LEVEL') ?? 'info', LOG_LEVELS),
    bodyLimitBytes: integer('BODY_LIMIT', read('BODY_LIMIT'), 16 * 1024, 1024, 1024 * 1024),
    cacheSize: integer('CACHE_SIZE', read('CACHE_SIZE'), 1_000_000, 100, 50_000_000),
    leaseMs: integer('CACHE_LEASE_MS', read('CACHE_LEASE_MS'), 500, 50, 10_000),
    warmUpUsers: integer('WARM_UP_USERS', read('WARM_UP_USERS'), 0, 0, 50_000_000),
    eventRetentionDays: integer('EVENT_RETENTION_DAYS', read('EVENT_RETENTION_DAYS'), 90, 1, 36_500),
    seedDemo: boolean('SEED_DEMO', read('SEED_DEMO'), true),
    redisPrefix: redisPrefix(read('REDIS_PREFIX') ?? 'chat-auth'),
    limits: limits(read),
  }
  if (config.warmUpUsers > config.cacheSize) {
    throw new ConfigError('WARM_UP_USERS', `must not exceed CACHE_SIZE (${config.cacheSize}): the cache would evict what the warm-up read`)
  }
  if (config.redis !== undefined && config.databaseUrl === undefined) {
    throw new ConfigError(config.redis.kind === 'url' ? 'REDIS_URL' : 'REDIS_SENTINELS', 'needs DATABASE_URL: nodes that share a channel must share one PostgreSQL (the embedded store serves a single node)')
  }
  return config
}

const DURATION = /^([1-9][0-9]{0,8})([mhd])$/
const UNIT_SECONDS = { m: 60, h: 3600, d: 86400 } as const

/** `<positive integer><m|h|d>` → seconds, or undefined when malformed. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text)
  if (!match) return undefined
  return Number(match[1]) * UNIT_SECONDS[match[2] as keyof typeof UNIT_SECONDS]
}

function duration(name: string, text: string): number {
  const seconds = parseDuration(text)
  if (seconds === undefined) throw new ConfigError(name, `expected <positive integer><m|h|d> such as 30d, got "${text}"`)
  return seconds
}

/**
 * Expiry dates must stay representable: JavaScript dates end in the year 275760, so a
 * lifetime of millions of days would make an expiry that cannot be written down.
 */
const MAX_TOKEN_TTL_SECONDS = 36_500 * 86400

function tokenMaxTtl(text: string): number {
  const seconds = duration('TOKEN_MAX_TTL', text)
  if (seconds > MAX_TOKEN_TTL_SECONDS) throw new ConfigError('TOKEN_MAX_TTL', `at most 36500d (100 years), got "${text}"`)
  return seconds
}

/** SPEC §7.3: slow clients and guessed credentials. Seconds in the environment, ms inside. */
function limits(read: (name: (typeof CONFIG_VARIABLES)[number]) => string | undefined): LimitsConfig {
  const requestTimeout = integer('REQUEST_TIMEOUT', read('REQUEST_TIMEOUT'), 10, 1, 3600)
  const headersTimeout = integer('HEADERS_TIMEOUT', read('HEADERS_TIMEOUT'), Math.min(10, requestTimeout), 1, 3600)
  // Node's rule: a request that may not take longer than N cannot take longer for its headers.
  if (headersTimeout > requestTimeout) throw new ConfigError('HEADERS_TIMEOUT', `must not exceed REQUEST_TIMEOUT (${requestTimeout}), got ${headersTimeout}`)
  return {
    requestTimeoutMs: requestTimeout * 1000,
    headersTimeoutMs: headersTimeout * 1000,
    keepAliveTimeoutMs: integer('KEEP_ALIVE_TIMEOUT', read('KEEP_ALIVE_TIMEOUT'), 72, 1, 3600) * 1000,
    maxConnections: integer('MAX_CONNECTIONS', read('MAX_CONNECTIONS'), 10_000, 0, 10_000_000),
    maxRequestsPerSocket: integer('MAX_REQUESTS_PER_SOCKET', read('MAX_REQUESTS_PER_SOCKET'), 0, 0, 10_000_000),
    authFailureLimit: integer('AUTH_FAILURE_LIMIT', read('AUTH_FAILURE_LIMIT'), 20, 0, 1_000_000),
    trustProxy: trustProxy(read('TRUST_PROXY')),
  }
}

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal']

/** A comma-separated list of proxy addresses, CIDR ranges or the names above. */
function trustProxy(text: string | undefined): string[] {
  if (text === undefined) return []
  const entries = text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
  for (const entry of entries) {
    const [address, prefix, ...rest] = entry.split('/')
    const version = isIP(address!)
    const prefixOk = prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 6 ? 128 : 32))
    if (PROXY_NAMES.includes(entry)) continue
    if (version === 0 || !prefixOk || rest.length > 0) {
      throw new ConfigError('TRUST_PROXY', `expected addresses, CIDR ranges or ${PROXY_NAMES.join('/')}, comma-separated; got "${entry}"`)
    }
  }
  return entries
}

function integer(name: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback
  if (!/^[0-9]+$/.test(text)) throw new ConfigError(name, `expected an integer, got "${text}"`)
  const value = Number(text)
  if (value < min || value > max) throw new ConfigError(name, `expected ${min}..${max}, got ${value}`)
  return value
}

function boolean(name: string, text: string | undefined, fallback: boolean): boolean {
  if (text === undefined) return fallback
  if (/^(1|true|yes|on)$/i.test(text)) return true
  if (/^(0|false|no|off)$/i.test(text)) return false
  throw new ConfigError(name, `expected true or false, got "${text}"`)
}

function oneOf<T extends string>(name: string, text: string, allowed: readonly T[]): T {
  if ((allowed as readonly string[]).includes(text)) return text as T
  throw new ConfigError(name, `expected one of ${allowed.join(', ')}, got "${text}"`)
}

function url(name: string, text: string | undefined, protocols: string[]): string | undefined {
  if (text === undefined) return undefined
  let parsed: URL
  try {
    parsed = new URL(text)
  } catch {
    throw new ConfigError(name, 'not a valid URL')
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(name, `expected a ${protocols.join(' or ')}// URL, got ${parsed.protocol}//`)
  }
  return text
}

type Read = (name: (typeof CONFIG_VARIABLES)[number]) => string | undefined

/** REDIS_URL, or the Sentinel variables: exactly one shape, nothing of the other. */
function redisConnection(read: Read): RedisConnection | undefined {
  const redisUrl = url('REDIS_URL', read('REDIS_URL'), ['redis:', 'rediss:'])
  const sentinels = read('REDIS_SENTINELS')
  const name = read('REDIS_SENTINEL_NAME')
  if (redisUrl !== undefined && sentinels !== undefined) {
    throw new ConfigError('REDIS_SENTINELS', 'set either REDIS_URL (one Redis server) or REDIS_SENTINELS with REDIS_SENTINEL_NAME (Redis Sentinel), not both')
  }
  const sentinelOnly = ['REDIS_SENTINEL_NAME', 'REDIS_SENTINEL_USERNAME', 'REDIS_SENTINEL_PASSWORD', 'REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_TLS'] as const
  if (sentinels === undefined) {
    const stray = sentinelOnly.find((variable) => read(variable) !== undefined)
    if (stray !== undefined) {
      const dataNodeSetting = stray === 'REDIS_USERNAME' || stray === 'REDIS_PASSWORD' || stray === 'REDIS_TLS'
      const hint = redisUrl !== undefined && dataNodeSetting ? ' (with REDIS_URL, the user and password go in the URL, and rediss:// is TLS)' : ''
      throw new ConfigError(stray, `only used with REDIS_SENTINELS${hint}`)
    }
    return redisUrl === undefined ? undefined : { kind: 'url', url: redisUrl }
  }
  if (name === undefined) throw new ConfigError('REDIS_SENTINEL_NAME', 'REDIS_SENTINELS needs the master name the sentinels monitor')
  if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(name)) throw new ConfigError('REDIS_SENTINEL_NAME', 'use 1..128 letters, digits, _ . : -')
  return {
    kind: 'sentinel',
    sentinels: sentinelAddresses(sentinels),
    name,
    sentinelUsername: read('REDIS_SENTINEL_USERNAME'),
    sentinelPassword: read('REDIS_SENTINEL_PASSWORD'),
    username: read('REDIS_USERNAME'),
    password: read('REDIS_PASSWORD'),
    tls: boolean('REDIS_TLS', read('REDIS_TLS'), false),
  }
}

/** `host:port,host:port,…`; an IPv6 address in brackets (`[::1]:26379`). */
function sentinelAddresses(text: string): SentinelAddress[] {
  const entries = text.split(',').map((entry) => entry.trim())
  const addresses = entries.map((entry) => {
    const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):([0-9]{1,5})$/.exec(entry)
    const host = match?.[1] ?? match?.[2]
    const port = Number(match?.[3])
    if (!match || host === undefined || (match[1] !== undefined && isIP(host) !== 6) || port < 1 || port > 65535) {
      throw new ConfigError('REDIS_SENTINELS', `expected host:port entries, comma-separated (IPv6 as [::1]:26379); got "${entry}"`)
    }
    return { host, port }
  })
  const keys = addresses.map((a) => `${a.host}:${a.port}`)
  const repeated = keys.find((key, i) => keys.indexOf(key) !== i)
  if (repeated !== undefined) throw new ConfigError('REDIS_SENTINELS', `${repeated} is listed twice (each sentinel counts once towards a majority)`)
  return addresses
}

function redisPrefix(text: string): string {
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(text)) throw new ConfigError('REDIS_PREFIX', 'use 1..64 letters, digits, _ . : -')
  return text
}

/** A folder for PGlite, or `memory://` for a store that lives and dies with the process. */
function dataDir(text: string): string {
  return text.startsWith('memory://') ? text : resolve(text)
}

function adminToken(text: string | undefined): string | undefined {
  if (text !== undefined && Buffer.byteLength(text) < 16) {
    throw new ConfigError('ADMIN_TOKEN', 'must be at least 16 characters')
  }
  return text
}

function jwtKeys(read: (name: (typeof CONFIG_VARIABLES)[number]) => string | undefined): JwtKeyConfig[] {
  const sources = ['JWT_SECRET', 'JWT_PRIVATE_KEY', 'JWT_PRIVATE_KEY_FILE', 'JWT_KEYS', 'JWT_KEYS_FILE'] as const
  const given = sources.filter((name) => read(name) !== undefined)
  if (given.length > 1) throw new ConfigError(given[1]!, `set only one of ${sources.join(', ')}; ${given.join(' and ')} are both set`)
  const algorithm = oneOf('JWT_ALGORITHM', read('JWT_ALGORITHM') ?? 'HS256', ALGORITHMS)

  const secret = read('JWT_SECRET')
  if (secret !== undefined) {
    if (algorithm !== 'HS256') throw new ConfigError('JWT_ALGORITHM', 'JWT_SECRET is an HS256 secret; use JWT_PRIVATE_KEY for ' + algorithm)
    return [checkKey('JWT_SECRET', { alg: 'HS256', secret })]
  }

  const privateKey = read('JWT_PRIVATE_KEY') ?? fileContent('JWT_PRIVATE_KEY_FILE', read('JWT_PRIVATE_KEY_FILE'))
  if (privateKey !== undefined) {
    if (algorithm === 'HS256') throw new ConfigError('JWT_ALGORITHM', 'a private key needs ES256, EdDSA or RS256')
    return [checkKey('JWT_PRIVATE_KEY', { alg: algorithm, privateKey: privateKey.replace(/\\n/g, '\n') })]
  }

  const keysJson = read('JWT_KEYS') ?? fileContent('JWT_KEYS_FILE', read('JWT_KEYS_FILE'))
  if (keysJson !== undefined) {
    const name = read('JWT_KEYS') !== undefined ? 'JWT_KEYS' : 'JWT_KEYS_FILE'
    let parsed: unknown
    try {
      parsed = JSON.parse(keysJson)
    } catch {
      throw new ConfigError(name, 'not valid JSON')
    }
    if (!Array.isArray(parsed) || parsed.length === 0) throw new ConfigError(name, 'expected a non-empty JSON array of keys')
    const keys = parsed.map((entry, index) => keyFromJson(name, index, entry))
    if (keys[0]!.publicKey !== undefined) throw new ConfigError(name, 'the first key signs, so it needs a secret or a privateKey')
    return keys
  }
  // Only HS256 keys are ever generated: another algorithm without its key is a mistake, not a default.
  if (read('JWT_ALGORITHM') !== undefined && algorithm !== 'HS256') {
    throw new ConfigError('JWT_ALGORITHM', `${algorithm} needs its private key in JWT_PRIVATE_KEY, JWT_PRIVATE_KEY_FILE or JWT_KEYS; without a key only HS256 is generated`)
  }
  return []
}

function keyFromJson(name: string, index: number, entry: unknown): JwtKeyConfig {
  const where = `${name}[${index}]`
  if (typeof entry !== 'object' || entry === null) throw new ConfigError(name, `${where} is not an object`)
  const record = entry as Record<string, unknown>
  const alg = record.alg ?? 'HS256'
  if (typeof alg !== 'string' || !(ALGORITHMS as readonly string[]).includes(alg)) {
    throw new ConfigError(name, `${where}.alg must be one of ${ALGORITHMS.join(', ')}`)
  }
  const key: JwtKeyConfig = { alg: alg as JwtAlgorithm }
  for (const field of ['kid', 'secret', 'privateKey', 'publicKey'] as const) {
    const value = record[field]
    if (value === undefined) continue
    if (typeof value !== 'string' || value === '') throw new ConfigError(name, `${where}.${field} must be a non-empty string`)
    key[field] = value
  }
  const materials = [key.secret, key.privateKey, key.publicKey].filter((v) => v !== undefined).length
  if (materials !== 1) throw new ConfigError(name, `${where} needs exactly one of secret, privateKey, publicKey`)
  if ((key.alg === 'HS256') !== (key.secret !== undefined)) {
    throw new ConfigError(name, `${where}: HS256 takes a secret, ${key.alg === 'HS256' ? 'not a PEM key' : key.alg + ' takes a PEM key'}`)
  }
  return checkKey(where, key, name)
}

function checkKey(where: string, key: JwtKeyConfig, variable = where): JwtKeyConfig {
  if (key.secret !== undefined && Buffer.byteLength(key.secret) < MIN_SECRET_BYTES) {
    throw new ConfigError(variable, `${where === variable ? 'the secret' : where + '.secret'} must be at least ${MIN_SECRET_BYTES} bytes`)
  }
  // A PEM key that is unreadable or of another algorithm stops the boot here, before any store is touched.
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

function fileContent(name: string, path: string | undefined): string | undefined {
  if (path === undefined) return undefined
  try {
    return readFileSync(path, 'utf8')
  } catch (error) {
    throw new ConfigError(name, `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`)
  }
}

/** What the admin subcommands of the CLI need: where the node is and the admin token. */
export interface ClientConfig {
  url: string
  adminToken: string | undefined
}

export function loadClientConfig(env: Env = process.env): ClientConfig {
  const port = integer('PORT', env.PORT?.trim() || undefined, 3000, 1, 65535)
  const host = env.HOST?.trim() || '127.0.0.1'
  return {
    url: url('CHAT_AUTH_URL', env.CHAT_AUTH_URL?.trim() || undefined, ['http:', 'https:']) ?? `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    adminToken: env.ADMIN_TOKEN?.trim() || undefined,
  }
}
