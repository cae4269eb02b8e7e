import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { ConfigError, loadConfig, parseDuration } from '../src/config.js'

t.test('defaults (SPEC §5)', async (t) => {
  const config = loadConfig({})
  t.equal(config.port, 3000)
  t.equal(config.host, '127.0.0.1')
  t.match(config.dataDir, /\/data$/)
  t.equal(config.databaseUrl, undefined)
  t.equal(config.redisUrl, undefined)
  t.equal(config.adminToken, undefined)
  t.same(config.jwt.keys, [], 'no key: one is generated and kept in the store')
  t.equal(config.jwt.clockToleranceSeconds, 0)
  t.equal(config.tokenMaxTtlSeconds, 30 * 86400)
  t.equal(config.bodyLimitBytes, 16 * 1024)
  t.equal(config.logLevel, 'info')
})

t.test('durations', async (t) => {
  t.equal(parseDuration('30m'), 1800)
  t.equal(parseDuration('1h'), 3600)
  t.equal(parseDuration('7d'), 7 * 86400)
  for (const bad of ['0h', '10', 'h', '1w', '-1h', '1.5h', ' 1h', '1H', '', '01h', '1hh']) t.equal(parseDuration(bad), undefined, JSON.stringify(bad))
})

t.test('every bad value stops start-up with a message naming the variable', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ PORT: 'abc' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL'],
    [{ DATABASE_URL: 'not a url' }, 'DATABASE_URL'],
    [{ REDIS_URL: 'http://x' }, 'REDIS_URL'],
    [{ ADMIN_TOKEN: 'short' }, 'ADMIN_TOKEN'],
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
    [{ SEED_DEMO: 'maybe' }, 'SEED_DEMO'],
    [{ REDIS_URL: 'redis://127.0.0.1:6379' }, 'REDIS_URL'],
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
    t.equal((error as ConfigError).variable, variable, `${JSON.stringify(env)} names ${variable}`)
    t.match((error as Error).message, new RegExp(`^${variable}`))
  }
})

t.test('the CLI refuses to start on a bad value and names it', async (t) => {
  const cli = fileURLToPath(new URL('../dist/src/cli.js', import.meta.url))
  const result = spawnSync(process.execPath, [cli, 'serve'], { env: { PATH: process.env.PATH, PORT: 'abc' }, encoding: 'utf8', timeout: 20_000 })
  t.equal(result.status, 1)
  t.match(result.stderr, /configuration error: PORT: expected an integer/)
})
