import { configuredKeys } from '../jwt/key-material.js'
import { ConfigError, type Config, type LimitsConfig, type RedisConnection } from './types.js'
import { CLIENT_VARIABLES, readVariables, TEST_VARIABLES, textOf, VARIABLES, type Env, type Values } from './variables.js'

/** Every declared variable read and checked on its own, then the rules that tie several together. */
export function parseConfig(env: Env): Config {
  const values = readVariables(VARIABLES, env)
  const isSet = (name: string) => textOf(env, name) !== undefined
  const config: Config = {
    port: values.PORT,
    host: values.HOST,
    dataDir: values.DATA_DIR,
    databaseUrl: values.DATABASE_URL,
    databasePreparedStatements: values.DATABASE_PREPARED_STATEMENTS,
    redis: redisConnection(values, isSet),
    adminToken: values.ADMIN_TOKEN,
    jwt: {
      keys: configuredKeys(values, isSet('JWT_ALGORITHM') ? values.JWT_ALGORITHM : undefined),
      issuer: values.JWT_ISSUER,
      audience: values.JWT_AUDIENCE,
      clockToleranceSeconds: values.JWT_CLOCK_TOLERANCE,
    },
    maxClockSkewSeconds: values.MAX_CLOCK_SKEW,
    tokenMaxTtlSeconds: values.TOKEN_MAX_TTL,
    jwksMaxAgeSeconds: values.JWKS_MAX_AGE,
    logLevel: values.LOG_LEVEL,
    bodyLimitBytes: values.BODY_LIMIT,
    cacheSize: values.CACHE_SIZE,
    cacheMaxBytes: values.CACHE_MAX_BYTES,
    revocationFilterBytes: values.REVOCATION_FILTER_BYTES,
    leaseMs: values.CACHE_LEASE_MS,
    warmUpUsers: values.WARM_UP_USERS,
    eventRetentionDays: values.EVENT_RETENTION_DAYS,
    maxLiveTokenRevocations: values.MAX_LIVE_TOKEN_REVOCATIONS,
    newUsers: { burst: values.NEW_USERS_BURST, perMinute: values.NEW_USERS_PER_MINUTE, maxUsers: values.MAX_USERS_PER_COMPANY },
    webhookRetryBaseMs: values.WEBHOOK_RETRY_BASE_MS,
    webhookPrivateNetworks: values.WEBHOOK_ALLOW_PRIVATE_NETWORKS,
    webhookSlotsPerCompany: values.WEBHOOK_SLOTS_PER_COMPANY,
    seedDemo: values.SEED_DEMO,
    redisPrefix: values.REDIS_PREFIX,
    limits: limits(values, isSet),
    console: { enabled: values.CONSOLE, sessionIdleSeconds: values.CONSOLE_SESSION_IDLE },
    nodeInternals: readVariables(TEST_VARIABLES, env).TEST_NODE_INTERNALS,
  }
  if (config.warmUpUsers > config.cacheSize) {
    throw new ConfigError('WARM_UP_USERS', `must not exceed CACHE_SIZE (${config.cacheSize}): the cache would evict what the warm-up read`)
  }
  if (config.redis !== undefined && config.databaseUrl === undefined) {
    throw new ConfigError({ url: 'REDIS_URL', sentinel: 'REDIS_SENTINELS', cluster: 'REDIS_CLUSTER_NODES' }[config.redis.kind], 'needs DATABASE_URL: nodes that share a channel must share one PostgreSQL (the embedded store serves a single node)')
  }
  return config
}

/** SPEC §7.3: slow clients and guessed credentials. Seconds in the environment, ms inside. */
function limits(values: Values, isSet: (name: string) => boolean): LimitsConfig {
  const requestTimeout = values.REQUEST_TIMEOUT
  // Unset, the headers' timeout follows a shorter request timeout.
  const headersTimeout = isSet('HEADERS_TIMEOUT') ? values.HEADERS_TIMEOUT : Math.min(values.HEADERS_TIMEOUT, requestTimeout)
  // Node's rule: a request that may not take longer than N cannot take longer for its headers.
  if (headersTimeout > requestTimeout) throw new ConfigError('HEADERS_TIMEOUT', `must not exceed REQUEST_TIMEOUT (${requestTimeout}), got ${headersTimeout}`)
  return {
    requestTimeoutMs: requestTimeout * 1000,
    headersTimeoutMs: headersTimeout * 1000,
    keepAliveTimeoutMs: values.KEEP_ALIVE_TIMEOUT * 1000,
    batchWrites: values.HTTP_WRITE_BATCHING,
    maxHeaderSize: values.MAX_HEADER_SIZE,
    maxConnections: values.MAX_CONNECTIONS,
    maxRequestsPerSocket: values.MAX_REQUESTS_PER_SOCKET,
    maxEventStreams: values.MAX_EVENT_STREAMS,
    maxEventStreamsPerCompany: values.MAX_EVENT_STREAMS_PER_COMPANY,
    authFailureLimit: values.AUTH_FAILURE_LIMIT,
    trustProxy: values.TRUST_PROXY ?? [],
  }
}

const SENTINEL_ONLY = ['REDIS_SENTINEL_NAME', 'REDIS_SENTINEL_USERNAME', 'REDIS_SENTINEL_PASSWORD'] as const
const DATA_SERVERS = ['REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_TLS'] as const
const SHAPES = ['REDIS_URL', 'REDIS_SENTINELS', 'REDIS_CLUSTER_NODES'] as const

/** REDIS_URL, the Sentinel variables or the Cluster ones: exactly one shape, nothing of the others. */
function redisConnection(values: Values, isSet: (name: string) => boolean): RedisConnection | undefined {
  const { REDIS_URL: redisUrl, REDIS_SENTINELS: sentinels, REDIS_CLUSTER_NODES: clusterNodes, REDIS_SENTINEL_NAME: name } = values
  const shapes = SHAPES.filter((shape) => values[shape] !== undefined)
  if (shapes.length > 1) {
    throw new ConfigError(shapes[1]!, `set exactly one of REDIS_URL (one Redis server), REDIS_SENTINELS with REDIS_SENTINEL_NAME (Redis Sentinel) or REDIS_CLUSTER_NODES (Redis Cluster); ${shapes.join(' and ')} are set`)
  }
  if (sentinels === undefined) {
    const stray = SENTINEL_ONLY.find(isSet) ?? (clusterNodes === undefined ? DATA_SERVERS.find(isSet) : undefined)
    if (stray !== undefined) {
      const dataServers = (DATA_SERVERS as readonly string[]).includes(stray)
      const hint = redisUrl !== undefined && dataServers ? ' (with REDIS_URL, the user and password go in the URL, and rediss:// is TLS)' : ''
      throw new ConfigError(stray, `only used with ${dataServers ? 'REDIS_SENTINELS or REDIS_CLUSTER_NODES' : 'REDIS_SENTINELS'}${hint}`)
    }
    if (clusterNodes !== undefined) return { kind: 'cluster', nodes: clusterNodes, username: values.REDIS_USERNAME, password: values.REDIS_PASSWORD, tls: values.REDIS_TLS }
    return redisUrl === undefined ? undefined : { kind: 'url', url: redisUrl }
  }
  if (name === undefined) throw new ConfigError('REDIS_SENTINEL_NAME', 'REDIS_SENTINELS needs the master name the sentinels monitor')
  return {
    kind: 'sentinel',
    sentinels,
    name,
    sentinelUsername: values.REDIS_SENTINEL_USERNAME,
    sentinelPassword: values.REDIS_SENTINEL_PASSWORD,
    username: values.REDIS_USERNAME,
    password: values.REDIS_PASSWORD,
    tls: values.REDIS_TLS,
  }
}

/** What the admin subcommands of the CLI need: where the node is and the admin token. */
export interface ClientConfig {
  url: string
  adminToken: string | undefined
  keyId: string | undefined
  keySecret: string | undefined
}

export function parseClientConfig(env: Env): ClientConfig {
  const { CHAT_AUTH_URL, ADMIN_TOKEN, CHAT_AUTH_KEY_ID, CHAT_AUTH_KEY_SECRET, HOST, PORT } = readVariables(CLIENT_VARIABLES, env)
  return { url: CHAT_AUTH_URL ?? `http://${HOST === '0.0.0.0' ? '127.0.0.1' : HOST}:${PORT}`, adminToken: ADMIN_TOKEN, keyId: CHAT_AUTH_KEY_ID, keySecret: CHAT_AUTH_KEY_SECRET }
}
