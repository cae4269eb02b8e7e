import { MIN_SECRET_BYTES } from '../jwt/key-material.js'
import { ConfigError, JWT_ALGORITHMS, LOG_LEVELS } from './types.js'
import { boolean, duration, folder, hostPorts, integer, networks, oneOf, proxies, redisName, span, text, url, type Variable } from './kinds.js'

/**
 * Every environment variable the service reads, declared once: the kind of its value with
 * its bounds, its default, and what it means. The parsing, the CLI's --help and the check
 * of docs/configuration.md's table all come from here; the rules that tie several
 * variables together are in load.ts. Durations and timeouts are seconds unless named _MS.
 */
export const VARIABLES = {
  PORT: integer(0, 65535, { default: '3000', help: 'HTTP port' }),
  HOST: text({ default: '127.0.0.1', help: 'interface to listen on (0.0.0.0 in containers)' }),
  DATA_DIR: folder({ default: './data', help: "PGlite's folder when DATABASE_URL is not set; memory:// keeps nothing" }),
  DATABASE_URL: url(['postgres:', 'postgresql:'], { help: 'postgres://…: use this PostgreSQL instead of the embedded store' }),
  // PgBouncer keeps named statements across its transactions only from 1.21 (max_prepared_statements).
  DATABASE_PREPARED_STATEMENTS: boolean({ default: 'true', help: "prepare the store's statements once per connection; false behind a pooler in transaction mode that cannot keep them" }),
  REDIS_URL: url(['redis:', 'rediss:'], { help: 'redis:// or rediss://…: the invalidation channel between nodes' }),
  REDIS_SENTINELS: hostPorts({ help: 'instead of REDIS_URL, Redis Sentinel: host:port of every sentinel' }),
  REDIS_SENTINEL_NAME: redisName(128, { help: 'the master name the sentinels monitor' }),
  REDIS_SENTINEL_USERNAME: text({ help: 'ACL user on the sentinels' }),
  REDIS_SENTINEL_PASSWORD: text({ help: 'password of the sentinels' }),
  REDIS_CLUSTER_NODES: hostPorts({ help: 'instead of REDIS_URL or REDIS_SENTINELS, Redis Cluster: host:port of some of its nodes (the rest are learned from them)' }),
  REDIS_USERNAME: text({ help: 'ACL user on the data servers (Sentinel or Cluster)' }),
  REDIS_PASSWORD: text({ help: 'password of the data servers (Sentinel or Cluster)' }),
  REDIS_TLS: boolean({ default: 'false', help: 'TLS to the sentinels and the data servers (Sentinel or Cluster)' }),
  ADMIN_TOKEN: text({ unset: 'generated', blankRefused: true, help: 'bearer token of the admin API' }, 16),
  // The key variables are text here: src/jwt/key-material.ts reads and checks the keys.
  // Without any of them a key is generated: blank is refused (see About.blankRefused).
  JWT_SECRET: text({ unset: 'generated', blankRefused: true, help: `HS256 signing secret (at least ${MIN_SECRET_BYTES} bytes)` }),
  JWT_ALGORITHM: oneOf(JWT_ALGORITHMS, { default: 'HS256', help: 'signing algorithm; the asymmetric ones need a private key' }),
  JWT_PRIVATE_KEY: text({ blankRefused: true, help: 'PEM private key (P-256, Ed25519 or RSA); \\n escapes allowed' }),
  JWT_PRIVATE_KEY_FILE: text({ blankRefused: true, help: 'the same, read from this file' }),
  JWT_KEYS: text({ blankRefused: true, help: 'key rotation: a JSON array of keys; the first signs, all verify' }),
  JWT_KEYS_FILE: text({ blankRefused: true, help: 'the same, read from this file' }),
  JWT_ISSUER: text({ help: 'iss claim written and required' }),
  JWT_AUDIENCE: text({ help: 'aud claim written and required' }),
  JWT_CLOCK_TOLERANCE: integer(0, 3600, { default: '0', help: 'seconds of leeway on exp' }),
  // A key rotation waits this long between its phases (docs/operations.md): a client may use a key set this old.
  JWKS_MAX_AGE: integer(0, 86_400, { default: '300', help: 'seconds clients and proxies may cache /.well-known/jwks.json (Cache-Control max-age)' }),
  // The bound the revocations' retention counts on (exp + JWT_CLOCK_TOLERANCE + this); a node measures its own offset against it.
  MAX_CLOCK_SKEW: span(3600, { default: '1s', help: "the most a node's clock may be off PostgreSQL's (<n>ms, <n>s or <n>m); past it /readyz answers 503" }),
  // JavaScript dates end in the year 275760: a longer lifetime would make an expiry no date can hold.
  TOKEN_MAX_TTL: duration(36_500, { default: '30d', help: 'the longest expiresIn accepted (<n>m, <n>h or <n>d)' }),
  LOG_LEVEL: oneOf(LOG_LEVELS, { default: 'info', help: 'how much to log' }),
  BODY_LIMIT: integer(1024, 1024 * 1024, { default: '16384', help: 'request body limit in bytes' }),
  // nginx forwards up to 4 × 8 KB of headers by default, Envoy up to 60 KB: a verify call either sends must be read.
  MAX_HEADER_SIZE: integer(16 * 1024, 1024 * 1024, { default: '65536', help: 'request line and headers limit in bytes (beyond it: 401 on the verify path, 431 elsewhere)' }),
  CACHE_SIZE: integer(100, 50_000_000, { default: '1000000', help: 'users cached per node (agents: a tenth, API keys: a hundredth)' }),
  // A user's external id is up to 255 characters: bounding by count alone lets a cached user cost 3× a short-id one.
  CACHE_MAX_BYTES: integer(65_536, 1_099_511_627_776, { default: '268435456', help: "estimated bytes of cached users per node (the external-id index as much, agents and companies a tenth, API keys a hundredth)" }),
  // Bounded whatever a tenant revokes: a Bloom filter in front of the store (cache/revoked-tokens.ts).
  REVOCATION_FILTER_BYTES: integer(65_536, 536_870_912, { default: '16777216', help: 'bytes of the filter of revoked jtis per node (twice this while it is rebuilt)' }),
  WARM_UP_USERS: integer(0, 50_000_000, { default: '0', help: 'users read into the cache at start, before /readyz answers 200' }),
  CACHE_LEASE_MS: integer(50, 10_000, { default: '500', help: 'how long a node trusts its cache after the channel proved alive' }),
  EVENT_RETENTION_DAYS: integer(1, 36_500, { default: '90', help: 'audit events older than this many days are deleted' }),
  // Each live revocation is a row in the store and an entry in every node's memory until its token expires.
  WEBHOOK_RETRY_BASE_MS: integer(10, 3_600_000, { default: '5000', help: 'wait after a failed webhook attempt, doubled after each (at most an hour), retried for 24 h' }),
  // Unset, a webhook's URL must be (and resolve to) a public unicast address (SPEC §9.3).
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: networks({ help: 'webhook destinations allowed besides public addresses: CIDR ranges (10.0.0.0/8,fd00::/8), or true for every address' }),
  // A node sends to 32 endpoints at once; one that hangs holds its slot for 5 s per attempt.
  WEBHOOK_SLOTS_PER_COMPANY: integer(1, 32, { default: '4', help: "of a node's 32 webhook sending slots, how many one company's endpoints may hold at once" }),
  MAX_LIVE_TOKEN_REVOCATIONS: integer(1, 100_000_000, { default: '100000', help: 'live single-token revocations (revoke-token) one company may hold; past it: 409' }),
  // SPEC §7.3: each new user is a row in the shared store and an entry in every node's shared cache.
  NEW_USERS_BURST: integer(1, 100_000_000, { default: '1000', help: 'new users (a token for a userId the company never used) one company may create at once; past it and NEW_USERS_PER_MINUTE: 429' }),
  NEW_USERS_PER_MINUTE: integer(1, 100_000_000, { default: '600', help: 'new users per minute one company may create once its burst is spent (the rate the burst refills at)' }),
  MAX_USERS_PER_COMPANY: integer(1, 1_000_000_000, { default: '10000000', help: 'customer users one company may hold; past it a new user is 409 (existing users still get tokens)' }),
  SEED_DEMO: boolean({ default: 'true', help: 'create a demo company, agent and key on an empty embedded store' }),
  REDIS_PREFIX: redisName(64, { default: 'chat-auth', help: 'prefix of the Redis channel and keys of this deployment' }),
  REQUEST_TIMEOUT: integer(1, 3600, { default: '10', help: 'seconds a client may take to send one whole request' }),
  HEADERS_TIMEOUT: integer(1, 3600, { default: '10', help: 'seconds a client may take to send the headers (at most REQUEST_TIMEOUT)' }),
  KEEP_ALIVE_TIMEOUT: integer(1, 3600, { default: '72', help: 'seconds an idle keep-alive connection stays open' }),
  HTTP_WRITE_BATCHING: boolean({ default: 'true', help: "write the answers of one event-loop turn together, at its end (one wake-up of a caller on the same host instead of one per answer); false: each as it is ready" }),
  MAX_CONNECTIONS: integer(0, 10_000_000, { default: '10000', help: 'open connections per node (0: no cap)' }),
  MAX_EVENT_STREAMS: integer(0, 1_000_000, { default: '1000', help: 'open event streams (GET /rest/v1/auth/events) per node; past it: 503' }),
  // A company's backends need a stream or a few per node; the rest of the node's places stay for the other companies.
  MAX_EVENT_STREAMS_PER_COMPANY: integer(1, 1_000_000, { default: '16', help: "open event streams of one company per node; past it: 429 (the other companies' streams still open)" }),
  MAX_REQUESTS_PER_SOCKET: integer(0, 10_000_000, { default: '0', help: 'requests on one connection before it is closed (0: no limit)' }),
  AUTH_FAILURE_LIMIT: integer(0, 1_000_000, { default: '20', help: 'failed credentials per minute per client or keyId (0: no limit)' }),
  // SPEC §10.3: the console is served by every node unless turned off; the admin API stays either way.
  CONSOLE: boolean({ default: 'true', help: 'serve the operators\' console at /console/ (false: every /console path is 404; the admin API stays)' }),
  CONSOLE_SESSION_IDLE: span(12 * 3600, { default: '30m', help: 'a console session unused this long ends (<n>ms, <n>s or <n>m; every session ends 12 h after sign-in)' }),
  TRUST_PROXY: proxies({ help: 'addresses or CIDR ranges of the proxies whose X-Forwarded-For names the client' }),
} satisfies Record<string, Variable<unknown>>

export type VariableName = keyof typeof VARIABLES

/**
 * What only the test suite sets: no operator needs it, so it is in neither the README's table
 * nor `--help`. Read with the others, once, at boot.
 */
export const TEST_VARIABLES = {
  // The start-up check (http/node-internals-check.ts) decides on its own; this makes a node
  // take the public way whatever it found, so that the tests run the hot paths both ways.
  TEST_NODE_INTERNALS: boolean({ default: 'true', help: "false: Node's public API only, whatever the start-up check found" }),
} satisfies Record<string, Variable<unknown>>

/** The variables this service reads, in the order of docs/configuration.md's table. */
export const CONFIG_VARIABLES = Object.keys(VARIABLES) as VariableName[]

/** What the CLI's admin and oauth calls read; they never start a node, so they read nothing else. */
export const CLIENT_VARIABLES = {
  CHAT_AUTH_URL: url(['http:', 'https:'], { unset: 'http://$HOST:$PORT', help: 'the node to call; --url wins' }),
  ADMIN_TOKEN: text({ help: 'the admin token to send; --admin-token wins' }),
  CHAT_AUTH_KEY_ID: text({ help: 'the API key id for the oauth calls; --key-id wins' }),
  // No flag for the secret: a command line is visible to every user of the machine.
  CHAT_AUTH_KEY_SECRET: text({ help: 'the API key secret for the oauth calls' }),
  HOST: text({ default: '127.0.0.1', help: 'host of the default URL, when CHAT_AUTH_URL is not set' }),
  PORT: integer(1, 65535, { default: '3000', help: 'port of the default URL, when CHAT_AUTH_URL is not set' }),
} satisfies Record<string, Variable<unknown>>

type Table = Record<string, Variable<unknown>>

/** What each variable of `table` holds once read: its value, or undefined when unset without a default. */
export type Values<T extends Table = typeof VARIABLES> = {
  [K in keyof T]: T[K] extends Variable<infer V, infer D> ? (D extends string ? V : V | undefined) : never
}

export type Env = Record<string, string | undefined>

/** The text `env` sets for `name`, trimmed; blank counts as unset (but see About.blankRefused). */
export function textOf(env: Env, name: string): string | undefined {
  const value = env[name]?.trim()
  return value === '' ? undefined : value
}

/** Each variable of `table` on its own: its text from `env` (or its default), parsed and checked. */
export function readVariables<T extends Table>(table: T, env: Env): Values<T> {
  const values: Record<string, unknown> = {}
  for (const [name, declared] of Object.entries(table)) {
    const written = textOf(env, name)
    if (written === undefined && env[name] !== undefined && declared.blankRefused) {
      throw new ConfigError(name, 'set but empty: give it a value, or leave it out to have one generated')
    }
    const value = written ?? declared.default
    values[name] = value === undefined ? undefined : declared.parse(value, name)
  }
  return values as Values<T>
}
