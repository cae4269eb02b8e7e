/**
 * The whole configuration, read and checked once at boot. Nothing else in the
 * service reads the environment: everything downstream receives this object.
 */
export interface Config {
  port: number
  host: string
  dataDir: string
  databaseUrl: string | undefined
  /** name the store's statements (PostgreSQL plans each once per connection) */
  databasePreparedStatements: boolean
  /** how to reach Redis (REDIS_URL, or REDIS_SENTINELS + REDIS_SENTINEL_NAME); undefined: one node, no bus */
  redis: RedisConnection | undefined
  /** undefined → generated at boot and printed once */
  adminToken: string | undefined
  jwt: JwtConfig
  /**
   * MAX_CLOCK_SKEW: the most a node's wall clock may be off PostgreSQL's. Revocations are
   * kept until exp + JWT_CLOCK_TOLERANCE + this; past it the node reports not ready (clock/).
   */
  maxClockSkewSeconds: number
  tokenMaxTtlSeconds: number
  /** Cache-Control max-age of /.well-known/jwks.json (JWKS_MAX_AGE): how long a published key set may be kept */
  jwksMaxAgeSeconds: number
  logLevel: LogLevel
  bodyLimitBytes: number
  /** users, agents and API keys each held in an LRU of this many entries */
  cacheSize: number
  /** estimated bytes of cached users; the external-id index as much, agents and companies a tenth, API keys a hundredth */
  cacheMaxBytes: number
  /** bytes of the filter of revoked jtis (twice this while a fresh one loads) */
  revocationFilterBytes: number
  /** live single-token revocations one company may hold; past it revoke-token answers 409 (MAX_LIVE_TOKEN_REVOCATIONS) */
  maxLiveTokenRevocations: number
  /** SPEC §7.3: the new users one company may create (NEW_USERS_BURST, NEW_USERS_PER_MINUTE) and hold (MAX_USERS_PER_COMPANY) */
  newUsers: NewUsersConfig
  /** audit events older than this many days are pruned (EVENT_RETENTION_DAYS) */
  eventRetentionDays: number
  /** the wait after a failed webhook attempt, doubled after each (WEBHOOK_RETRY_BASE_MS) */
  webhookRetryBaseMs: number
  /** webhook destinations allowed besides public addresses: CIDR ranges, or true for all (WEBHOOK_ALLOW_PRIVATE_NETWORKS) */
  webhookPrivateNetworks: true | string[] | undefined
  /** how many of a node's webhook sending slots one company may hold at once (WEBHOOK_SLOTS_PER_COMPANY) */
  webhookSlotsPerCompany: number
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
  /**
   * Node's internals used where the start-up check found them as expected (http/node-internals.ts);
   * false, set only by the tests (TEST_NODE_INTERNALS), takes Node's public API whatever it found
   */
  nodeInternals: boolean
  /** SPEC §10.3: the operators' console (CONSOLE, CONSOLE_SESSION_IDLE) */
  console: ConsoleConfig
}

export interface ConsoleConfig {
  /** served at /console/ (CONSOLE) */
  enabled: boolean
  /** a session unused this long ends (CONSOLE_SESSION_IDLE); every one ends 12 h after sign-in */
  sessionIdleSeconds: number
}

/** A company's new users: a bucket of `burst` refilled at `perMinute`, and at most `maxUsers` users in all. */
export interface NewUsersConfig {
  burst: number
  perMinute: number
  maxUsers: number
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

/**
 * A Redis Cluster, reached through some of its nodes (SPEC §11): the bus lives in the one hash
 * slot of `{REDIS_PREFIX}` and follows the master a majority of the cluster's nodes say holds it.
 */
export interface RedisClusterConnection {
  kind: 'cluster'
  /** seed nodes: the rest of the cluster is learned from them */
  nodes: SentinelAddress[]
  username: string | undefined
  password: string | undefined
  tls: boolean
}

export type RedisConnection = RedisUrlConnection | RedisSentinelConnection | RedisClusterConnection

export interface LimitsConfig {
  /** the longest a client may take to send one whole request (headers and body) */
  requestTimeoutMs: number
  /** the longest it may take to send the headers; at most requestTimeoutMs */
  headersTimeoutMs: number
  /** how long an idle keep-alive connection stays open between requests */
  keepAliveTimeoutMs: number
  /** the answers of one event-loop turn written together at its end (http/write-batching.ts) */
  batchWrites: boolean
  /** the request line and headers Node's parser reads; beyond it the request is refused */
  maxHeaderSize: number
  /** open connections per node; more are closed on arrival (0: unlimited) */
  maxConnections: number
  /** requests on one connection before it is closed (0: unlimited) */
  maxRequestsPerSocket: number
  /** open event streams per node (SPEC §8.2); past it: 503 */
  maxEventStreams: number
  /** open event streams of one company per node (SPEC §8.2); past it: 429 */
  maxEventStreamsPerCompany: number
  /** failed credentials per minute per client address and per keyId (0: no limit) */
  authFailureLimit: number
  /** proxies whose X-Forwarded-For names the client: addresses, CIDRs, loopback/linklocal/uniquelocal */
  trustProxy: string[]
}

export const JWT_ALGORITHMS = ['HS256', 'ES256', 'EdDSA', 'RS256'] as const
export type JwtAlgorithm = (typeof JWT_ALGORITHMS)[number]

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const
export type LogLevel = (typeof LOG_LEVELS)[number]

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

/** A value the service cannot start with: names the variable, then what was expected. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`)
    this.name = 'ConfigError'
  }
}
