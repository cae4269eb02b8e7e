/**
 * A slow start is not a failed one: the app's Fastify options give each plugin a minute to
 * start, not Fastify's 10 s, which a node on a loaded machine once exceeded while it
 * migrated and connected ("Plugin did not start in time"), and exited.
 */
import { Writable } from 'node:stream'
import Fastify from 'fastify'
import t from 'tap'
import { fastifyOptions, PLUGIN_START_TIMEOUT_MS } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createLogger } from '../../src/logger.js'

t.test("the app's Fastify gives a plugin a minute to start", async (t) => {
  const config = loadConfig({ ADMIN_TOKEN: 'adm_' + 'x'.repeat(32), JWT_SECRET: 'y'.repeat(48), LOG_LEVEL: 'silent', SEED_DEMO: 'false', DATA_DIR: 'memory://' })
  const fastify = Fastify(fastifyOptions(config, createLogger(config, new Writable({ write: (_chunk, _encoding, done) => done() }))))
  t.teardown(() => fastify.close())
  t.equal(PLUGIN_START_TIMEOUT_MS, 60_000)
  t.equal(fastify.initialConfig.pluginTimeout, PLUGIN_START_TIMEOUT_MS, 'Fastify was built with it')
  t.ok(PLUGIN_START_TIMEOUT_MS > 10_000, "more than Fastify's default")
})
