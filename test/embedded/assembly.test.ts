import { Writable } from 'node:stream'
import t from 'tap'
import type { InvalidationBus } from '../../src/bus/bus.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import { createGateway } from '../../src/gateway.js'
import { createLogger } from '../../src/logger.js'
import { ADMIN_TOKEN, JWT_SECRET } from '../support/constants.js'
import { migratedDataDir } from '../support/pglite-data-dir.js'

/**
 * One assembly, one teardown (gateway.ts, src/assembly/): the parts a node opened are closed
 * by the same path whether the node shuts down or its start fails half-way. What shows it
 * from outside: the embedded store's DATA_DIR is held by a lock while a node has it open,
 * so a second node on the same folder starts only once the first closed its store.
 */
const quiet = () => new Writable({ write: (_chunk, _enc, done) => done() })

async function node(dataDir: string) {
  const config = loadConfig({ DATA_DIR: dataDir, ADMIN_TOKEN, JWT_SECRET, SEED_DEMO: 'false', LOG_LEVEL: 'silent' })
  return { config, logger: createLogger(config, quiet()) }
}

/** Wraps the node's bus so that its start fails: the store, the keys and the bus are open by then. */
const failingStart = (bus: InvalidationBus): InvalidationBus => ({ ...bus, start: () => Promise.reject(new Error('the bus cannot start')) })

t.test('a start that fails half-way closes what the parts before it opened', async (t) => {
  const dataDir = await migratedDataDir(t)
  const { config, logger } = await node(dataDir)
  await t.rejects(buildApp(config, { logger, parts: { bus: failingStart } }), { message: 'the bus cannot start' }, 'the start fails at the bus')
  const next = await buildApp(config, { logger })
  t.teardown(() => next.app.close())
  t.ok(next.gateway.bus.trusted(), 'a second node starts on the same DATA_DIR: the failed one closed its store')
})

t.test('createGateway takes the same path: a failed start closes the store it opened', async (t) => {
  const dataDir = await migratedDataDir(t)
  const { config, logger } = await node(dataDir)
  await t.rejects(createGateway(config, { logger, parts: { bus: failingStart } }), { message: 'the bus cannot start' }, 'the start fails at the bus')
  const gateway = await createGateway(config, { logger })
  t.teardown(() => gateway.close())
  t.equal((await gateway.store.countCompanies()) >= 0, true, 'a second node on the same DATA_DIR reads its store')
})

t.test('a shutdown closes the store too, and a node starts again on it', async (t) => {
  const dataDir = await migratedDataDir(t)
  const { config, logger } = await node(dataDir)
  const first = await buildApp(config, { logger })
  await t.rejects(buildApp(config, { logger }), { message: /in use by another chat-auth process/ }, 'while the first runs, the DATA_DIR is held')
  await first.app.close()
  const second = await buildApp(config, { logger })
  t.teardown(() => second.app.close())
  t.ok(second.gateway.warmedUp(), 'after the shutdown, a node starts on the same DATA_DIR')
})
