import { spawnSync } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { ConfigError, loadConfig, parseDuration, VARIABLES } from '../../../src/config.js'

t.test('defaults (SPEC §5)', async (t) => {
  const config = loadConfig({})
  t.equal(config.port, 3000)
  t.equal(config.host, '127.0.0.1')
  t.match(config.dataDir, /\/data$/)
  t.equal(config.databaseUrl, undefined)
  t.equal(config.redis, undefined)
  t.equal(config.adminToken, undefined)
  t.same(config.jwt.keys, [], 'no key: one is generated and kept in the store')
  t.equal(config.jwt.clockToleranceSeconds, 0)
  t.equal(config.tokenMaxTtlSeconds, 30 * 86400)
  t.equal(config.bodyLimitBytes, 16 * 1024)
  t.equal(config.logLevel, 'info')
  t.equal(config.cacheSize, 1_000_000)
  t.equal(config.cacheMaxBytes, 256 * 2 ** 20, "a byte budget that 1,000,000 short-id users fit in (bench/RESULTS.md)")
})

t.test('durations', async (t) => {
  t.equal(parseDuration('30m'), 1800)
  t.equal(parseDuration('1h'), 3600)
  t.equal(parseDuration('7d'), 7 * 86400)
  for (const bad of ['0h', '10', 'h', '1w', '-1h', '1.5h', ' 1h', '1H', '', '01h', '1hh']) t.equal(parseDuration(bad), undefined, JSON.stringify(bad))
})

const PG = 'postgres://root@127.0.0.1:5432/test'

const pem = (type: 'ed25519' | 'ec') =>
  generateKeyPairSync(type as 'ec', (type === 'ec' ? { namedCurve: 'prime256v1' } : {}) as { namedCurve: string }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
const ED25519_PEM = pem('ed25519')
const P256_PUBLIC_PEM = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({ format: 'pem', type: 'spki' }).toString()

t.test('every bad value stops start-up with a message naming the variable', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    // Issue 10, finding 8: an algorithm without its key, or with another algorithm's key.
    [{ JWT_ALGORITHM: 'ES256' }, 'JWT_ALGORITHM'],
    [{ JWT_ALGORITHM: 'RS256' }, 'JWT_ALGORITHM'],
    [{ JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: ED25519_PEM }, 'JWT_PRIVATE_KEY'],
    [{ JWT_ALGORITHM: 'EdDSA', JWT_PRIVATE_KEY: 'not a pem' }, 'JWT_PRIVATE_KEY'],
    [{ JWT_KEYS: JSON.stringify([{ alg: 'EdDSA', privateKey: ED25519_PEM }, { alg: 'RS256', publicKey: P256_PUBLIC_PEM }]) }, 'JWT_KEYS'],
    // Issue 10, finding 7: a lifetime whose expiry no date can hold.
    [{ TOKEN_MAX_TTL: '999999999d' }, 'TOKEN_MAX_TTL'],
    [{ TOKEN_MAX_TTL: '36501d' }, 'TOKEN_MAX_TTL'],
    // Issue 10, finding 1 and 2: connection and failure limits.
    [{ REQUEST_TIMEOUT: '0' }, 'REQUEST_TIMEOUT'],
    [{ REQUEST_TIMEOUT: '5', HEADERS_TIMEOUT: '6' }, 'HEADERS_TIMEOUT'],
    [{ KEEP_ALIVE_TIMEOUT: '1.5' }, 'KEEP_ALIVE_TIMEOUT'],
    [{ MAX_CONNECTIONS: 'lots' }, 'MAX_CONNECTIONS'],
    [{ MAX_REQUESTS_PER_SOCKET: '-1' }, 'MAX_REQUESTS_PER_SOCKET'],
    [{ AUTH_FAILURE_LIMIT: 'none' }, 'AUTH_FAILURE_LIMIT'],
    // Issue 19: a company's live single-token revocations; there is no "no limit".
    [{ MAX_LIVE_TOKEN_REVOCATIONS: '0' }, 'MAX_LIVE_TOKEN_REVOCATIONS'],
    [{ MAX_LIVE_TOKEN_REVOCATIONS: '100000001' }, 'MAX_LIVE_TOKEN_REVOCATIONS'],
    // Issue 40: a company's new users; there is no "no limit" either.
    [{ NEW_USERS_BURST: '0' }, 'NEW_USERS_BURST'],
    [{ NEW_USERS_PER_MINUTE: '0' }, 'NEW_USERS_PER_MINUTE'],
    [{ NEW_USERS_PER_MINUTE: '1.5' }, 'NEW_USERS_PER_MINUTE'],
    [{ MAX_USERS_PER_COMPANY: '0' }, 'MAX_USERS_PER_COMPANY'],
    [{ MAX_USERS_PER_COMPANY: '1000000001' }, 'MAX_USERS_PER_COMPANY'],
    [{ TRUST_PROXY: 'proxy.example.com' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '10.0.0.0/33' }, 'TRUST_PROXY'],
    [{ TRUST_PROXY: '127.0.0.1, true' }, 'TRUST_PROXY'],
    // Issue 40, point 4: webhook destinations allowed besides public addresses.
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'yes' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: '10.0.0.1' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: '10.0.0.0/33' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'fd00::/129' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: '10.0.0.0/8, true' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
    [{ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'intranet.example/8' }, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS'],
    [{ WEBHOOK_SLOTS_PER_COMPANY: '0' }, 'WEBHOOK_SLOTS_PER_COMPANY'],
    [{ WEBHOOK_SLOTS_PER_COMPANY: '33' }, 'WEBHOOK_SLOTS_PER_COMPANY'],
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
    [{ REDIS_URL: 'http://x' }, 'REDIS_URL'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN'],
    // Issue 40, point 9: a secret set to nothing (`ADMIN_TOKEN=` in an env file, `$UNSET_VAR`)
    // is a mistake, not "unset": the node would generate a secret of its own and go on.
    ...['ADMIN_TOKEN', 'JWT_SECRET', 'JWT_PRIVATE_KEY', 'JWT_PRIVATE_KEY_FILE', 'JWT_KEYS', 'JWT_KEYS_FILE'].flatMap((name) =>
      ['', '  '].map((blank) => [{ [name]: blank }, name] as [Record<string, string>, string]),
    ),
    [{ JWT_SECRET: 'too-short' }, 'JWT_SECRET'],
    [{ JWT_ALGORITHM: 'HS512' }, 'JWT_ALGORITHM'],
    [{ JWT_ALGORITHM: 'ES256', JWT_SECRET: 'x'.repeat(40) }, 'JWT_ALGORITHM'],
    [{ JWT_SECRET: 'x'.repeat(40), JWT_KEYS: '[]' }, 'JWT_KEYS'],
    [{ JWT_KEYS: 'not json' }, 'JWT_KEYS'],
    [{ JWT_KEYS: '[]' }, 'JWT_KEYS'],
    [{ JWT_KEYS: '[{"alg":"HS256","secret":"short"}]' }, 'JWT_KEYS'],
    [{ JWT_KEYS: '[{"alg":"ES256","secret":"' + 'x'.repeat(40) + '"}]' }, 'JWT_KEYS'],
    [{ JWT_PRIVATE_KEY_FILE: '/nonexistent/key.pem', JWT_ALGORITHM: 'ES256' }, 'JWT_PRIVATE_KEY_FILE'],
    [{ JWT_CLOCK_TOLERANCE: '-1' }, 'JWT_CLOCK_TOLERANCE'],
    [{ TOKEN_MAX_TTL: '30' }, 'TOKEN_MAX_TTL'],
    [{ TOKEN_MAX_TTL: '1w' }, 'TOKEN_MAX_TTL'],
    [{ LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
    [{ BODY_LIMIT: '10' }, 'BODY_LIMIT'],
    [{ CACHE_SIZE: 'many' }, 'CACHE_SIZE'],
    [{ CACHE_MAX_BYTES: '1000' }, 'CACHE_MAX_BYTES'],
    [{ CACHE_MAX_BYTES: '1GB' }, 'CACHE_MAX_BYTES'],
    [{ WARM_UP_USERS: '-1' }, 'WARM_UP_USERS'],
    [{ WARM_UP_USERS: 'all' }, 'WARM_UP_USERS'],
    [{ WARM_UP_USERS: '2000', CACHE_SIZE: '1000' }, 'WARM_UP_USERS'],
    [{ SEED_DEMO: 'maybe' }, 'SEED_DEMO'],
    [{ REDIS_URL: 'redis://127.0.0.1:6379' }, 'REDIS_URL'],
    // Issue 13: Redis Sentinel, the other shape of the Redis settings.
    [{ DATABASE_URL: PG, REDIS_URL: 'redis://r:6379', REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS'],
    [{ DATABASE_URL: PG, REDIS_SENTINELS: 's1:26379' }, 'REDIS_SENTINEL_NAME'],
    [{ DATABASE_URL: PG, REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINEL_NAME'],
    [{ DATABASE_URL: PG, REDIS_URL: 'redis://r:6379', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINEL_NAME'],
    [{ DATABASE_URL: PG, REDIS_URL: 'redis://r:6379', REDIS_PASSWORD: 'secret' }, 'REDIS_PASSWORD'],
    [{ DATABASE_URL: PG, REDIS_URL: 'redis://r:6379', REDIS_USERNAME: 'chat' }, 'REDIS_USERNAME'],
    [{ DATABASE_URL: PG, REDIS_URL: 'redis://r:6379', REDIS_TLS: 'true' }, 'REDIS_TLS'],
    [{ DATABASE_URL: PG, REDIS_SENTINEL_PASSWORD: 'secret' }, 'REDIS_SENTINEL_PASSWORD'],
    [{ REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS'],
    ...['s1', 's1:', ':26379', 's1:0', 's1:70000', 's1:26379,,s2:26379', '::1:26379', '[::1]', '[not-v6]:26379', 'a b:1', 's1:26379,s1:26379'].map(
      (sentinels) => [{ DATABASE_URL: PG, REDIS_SENTINELS: sentinels, REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINELS'] as [Record<string, string>, string],
    ),
    [{ DATABASE_URL: PG, REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'my master' }, 'REDIS_SENTINEL_NAME'],
    [{ DATABASE_URL: PG, REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'm', REDIS_TLS: 'perhaps' }, 'REDIS_TLS'],
    // Issue 44: Redis Cluster, the third shape: exactly one of the three, and nothing of the others.
    [{ DATABASE_URL: PG, REDIS_URL: 'redis://r:6379', REDIS_CLUSTER_NODES: 'c1:7000' }, 'REDIS_CLUSTER_NODES'],
    [{ DATABASE_URL: PG, REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_NAME: 'm', REDIS_CLUSTER_NODES: 'c1:7000' }, 'REDIS_CLUSTER_NODES'],
    [{ DATABASE_URL: PG, REDIS_CLUSTER_NODES: 'c1:7000', REDIS_SENTINEL_NAME: 'm' }, 'REDIS_SENTINEL_NAME'],
    [{ DATABASE_URL: PG, REDIS_CLUSTER_NODES: 'c1:7000', REDIS_SENTINEL_PASSWORD: 'secret' }, 'REDIS_SENTINEL_PASSWORD'],
    [{ REDIS_CLUSTER_NODES: 'c1:7000' }, 'REDIS_CLUSTER_NODES'],
    ...['c1', 'c1:0', 'c1:7000,c1:7000'].map((nodes) => [{ DATABASE_URL: PG, REDIS_CLUSTER_NODES: nodes }, 'REDIS_CLUSTER_NODES'] as [Record<string, string>, string]),
  ]
  for (const [env, variable] of cases) {
    const error = (() => {
      try {
        loadConfig(env)
      } catch (e) {
        return e
      }
    })()
    t.type(error, ConfigError, JSON.stringify(env))
    t.equal((error as ConfigError | undefined)?.variable, variable, `${JSON.stringify(env)} names ${variable}`)
    t.match((error as Error | undefined)?.message, new RegExp(`^${variable}`))
  }
})

t.test('a blank value is unset where unset is a choice, not where it means "generate a secret"', async (t) => {
  // docker-compose.sentinel.yml clears the base file's REDIS_URL with REDIS_URL: "".
  t.equal(loadConfig({ REDIS_URL: '', DATABASE_URL: '' }).redis, undefined, 'REDIS_URL="" is unset')
  t.equal(loadConfig({ PORT: '' }).port, 3000, 'a blank PORT takes its default')
  t.equal(loadConfig({ JWT_ISSUER: ' ' }).jwt.issuer, undefined, 'a blank JWT_ISSUER is unset')
  t.throws(() => loadConfig({ ADMIN_TOKEN: '' }), /^ADMIN_TOKEN: set but empty/, 'ADMIN_TOKEN="" is refused, not replaced by a generated token')
})

t.test('Redis: one server by URL, or Redis Sentinel', async (t) => {
  t.same(loadConfig({ DATABASE_URL: PG, REDIS_URL: 'rediss://chat:pw@r:6380' }).redis, { kind: 'url', url: 'rediss://chat:pw@r:6380' })
  t.same(loadConfig({ DATABASE_URL: PG, REDIS_CLUSTER_NODES: 'c1:7000, 10.0.0.2:7001', REDIS_USERNAME: 'chat', REDIS_PASSWORD: 'pw', REDIS_TLS: 'true' }).redis, {
    kind: 'cluster',
    nodes: [
      { host: 'c1', port: 7000 },
      { host: '10.0.0.2', port: 7001 },
    ],
    username: 'chat',
    password: 'pw',
    tls: true,
  })
  t.same(loadConfig({ DATABASE_URL: PG, REDIS_SENTINELS: ' s1:26379, 10.0.0.2:26380 ,[::1]:26381', REDIS_SENTINEL_NAME: 'chat-auth' }).redis, {
    kind: 'sentinel',
    sentinels: [
      { host: 's1', port: 26379 },
      { host: '10.0.0.2', port: 26380 },
      { host: '::1', port: 26381 },
    ],
    name: 'chat-auth',
    sentinelUsername: undefined,
    sentinelPassword: undefined,
    username: undefined,
    password: undefined,
    tls: false,
  })
  const withSecrets = loadConfig({
    DATABASE_URL: PG,
    REDIS_SENTINELS: 's1:26379',
    REDIS_SENTINEL_NAME: 'm',
    REDIS_SENTINEL_USERNAME: 'watcher',
    REDIS_SENTINEL_PASSWORD: 'sentinel-secret',
    REDIS_USERNAME: 'chat',
    REDIS_PASSWORD: 'data-secret',
    REDIS_TLS: 'true',
  }).redis
  t.match(withSecrets, { kind: 'sentinel', sentinelUsername: 'watcher', sentinelPassword: 'sentinel-secret', username: 'chat', password: 'data-secret', tls: true })
})

t.test("TEST_NODE_INTERNALS: the tests' switch to Node's public API, not among the variables an operator sets", async (t) => {
  t.equal(loadConfig({}).nodeInternals, true, 'by default a node uses what the start-up check allows')
  t.equal(loadConfig({ TEST_NODE_INTERNALS: 'false' }).nodeInternals, false)
  t.throws(() => loadConfig({ TEST_NODE_INTERNALS: 'maybe' }), /TEST_NODE_INTERNALS/, 'checked like any other')
  t.notOk('TEST_NODE_INTERNALS' in VARIABLES, 'neither in the README table nor in --help')
})

t.test('limits: defaults and accepted values', async (t) => {
  t.same(loadConfig({}).limits, {
    requestTimeoutMs: 10_000,
    headersTimeoutMs: 10_000,
    keepAliveTimeoutMs: 72_000,
    batchWrites: true,
    maxHeaderSize: 65_536,
    maxConnections: 10_000,
    maxRequestsPerSocket: 0,
    maxEventStreams: 1000,
    maxEventStreamsPerCompany: 16,
    authFailureLimit: 20,
    trustProxy: [],
  })
  const set = loadConfig({ REQUEST_TIMEOUT: '3', KEEP_ALIVE_TIMEOUT: '5', MAX_CONNECTIONS: '0', AUTH_FAILURE_LIMIT: '0', TRUST_PROXY: '10.0.0.0/8, ::1,loopback' }).limits
  t.equal(set.requestTimeoutMs, 3000)
  t.equal(set.headersTimeoutMs, 3000, 'headers follow a shorter request timeout')
  t.equal(set.keepAliveTimeoutMs, 5000)
  t.equal(loadConfig({ HTTP_WRITE_BATCHING: 'false' }).limits.batchWrites, false)
  t.throws(() => loadConfig({ HTTP_WRITE_BATCHING: 'sometimes' }), /HTTP_WRITE_BATCHING/, 'HTTP_WRITE_BATCHING takes true or false')
  t.same(set.trustProxy, ['10.0.0.0/8', '::1', 'loopback'])
  t.equal(loadConfig({ MAX_HEADER_SIZE: '1048576' }).limits.maxHeaderSize, 1024 * 1024)
  for (const refused of ['16383', '1048577', '64k']) t.throws(() => loadConfig({ MAX_HEADER_SIZE: refused }), /MAX_HEADER_SIZE/, `MAX_HEADER_SIZE=${refused} is refused`)
  t.equal(loadConfig({ TOKEN_MAX_TTL: '36500d' }).tokenMaxTtlSeconds, 36500 * 86400)
  t.equal(loadConfig({}).maxLiveTokenRevocations, 100_000)
  t.equal(loadConfig({ MAX_LIVE_TOKEN_REVOCATIONS: '1' }).maxLiveTokenRevocations, 1)
  t.equal(loadConfig({}).webhookPrivateNetworks, undefined, 'unset: public destinations only')
  t.equal(loadConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }).webhookPrivateNetworks, true)
  t.same(loadConfig({ WEBHOOK_ALLOW_PRIVATE_NETWORKS: '10.0.0.0/8, fd00::/8,127.0.0.1/32' }).webhookPrivateNetworks, ['10.0.0.0/8', 'fd00::/8', '127.0.0.1/32'])
  t.equal(loadConfig({}).webhookSlotsPerCompany, 4)
  t.equal(loadConfig({ WEBHOOK_SLOTS_PER_COMPANY: '32' }).webhookSlotsPerCompany, 32)
  t.same(loadConfig({}).newUsers, { burst: 1000, perMinute: 600, maxUsers: 10_000_000 })
  t.same(loadConfig({ NEW_USERS_BURST: '1', NEW_USERS_PER_MINUTE: '100000000', MAX_USERS_PER_COMPANY: '1000000000' }).newUsers, { burst: 1, perMinute: 100_000_000, maxUsers: 1_000_000_000 })
})

t.test('a key of another algorithm stops the boot before any store is touched', async (t) => {
  const cli = fileURLToPath(new URL('../../../dist/src/cli.js', import.meta.url))
  // Nothing listens on port 1: reaching the database would be a different error, after seconds.
  const env = { PATH: process.env.PATH, DATABASE_URL: 'postgres://root@127.0.0.1:1/none', JWT_ALGORITHM: 'ES256', JWT_PRIVATE_KEY: ED25519_PEM }
  const result = spawnSync(process.execPath, [cli, 'serve'], { env, encoding: 'utf8', timeout: 20_000 })
  t.equal(result.status, 1)
  t.match(result.stderr, /configuration error: JWT_PRIVATE_KEY: the key is a ed25519 key, not one for ES256/)
  const noKey = spawnSync(process.execPath, [cli, 'serve'], { env: { PATH: process.env.PATH, DATA_DIR: 'memory://', JWT_ALGORITHM: 'ES256' }, encoding: 'utf8', timeout: 20_000 })
  t.equal(noKey.status, 1)
  t.match(noKey.stderr, /configuration error: JWT_ALGORITHM: ES256 needs its private key/)
})

t.test('the CLI refuses to start on a bad value and names it', async (t) => {
  const cli = fileURLToPath(new URL('../../../dist/src/cli.js', import.meta.url))
  const result = spawnSync(process.execPath, [cli, 'serve'], { env: { PATH: process.env.PATH, PORT: 'abc' }, encoding: 'utf8', timeout: 20_000 })
  t.equal(result.status, 1)
  t.match(result.stderr, /configuration error: PORT: expected an integer/)
  // Issue 40, point 9: before, the node started and printed a generated admin token.
  const blankToken = spawnSync(process.execPath, [cli, 'serve'], { env: { PATH: process.env.PATH, DATA_DIR: 'memory://', PORT: '0', ADMIN_TOKEN: '' }, encoding: 'utf8', timeout: 20_000 })
  t.equal(blankToken.status, 1, 'ADMIN_TOKEN="" stops the boot')
  t.match(blankToken.stderr, /configuration error: ADMIN_TOKEN: set but empty/)
  t.notMatch(blankToken.stdout, /ADMIN_TOKEN=/, 'no token is generated and printed')
})
