import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { createPgliteDb } from '../../src/store/db.js'
import { ADMIN_TOKEN, JWT_SECRET, STORE } from '../support/constants.js'
import { migratedDataDir } from '../support/pglite-data-dir.js'
import { startGatewayProcess } from '../support/processes.js'

/**
 * One store, one owner: a second process on the same PGlite DATA_DIR exits at start, naming
 * the owner's pid; the lock of a process killed with SIGKILL does not block the next start.
 * PGlite only, so this file runs once, in the PGlite pass.
 */
const CLI = fileURLToPath(new URL('../../dist/src/cli.js', import.meta.url))

const admin = (base: string, method: string, path: string, body?: unknown) =>
  fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  })

// Each PGlite node process takes seconds to start, tens of seconds on a busy 2-core machine.
t.setTimeout(300_000)

if (STORE !== 'pglite') {
  t.pass('the DATA_DIR lock tests run in the PGlite pass')
} else {
  t.test('a second process on the same DATA_DIR exits at start naming the owner; a kill -9 leaves no lock behind', async (t) => {
    // The lock is taken before the store opens, whether the folder is empty or holds a store:
    // these tests start on a migrated one, not on seconds of initdb each.
    const DATA_DIR = await migratedDataDir(t)
    const env = { DATA_DIR, ADMIN_TOKEN, JWT_SECRET }
    const first = await startGatewayProcess(env, { teardown: t.teardown.bind(t), timeoutMs: 180_000 })
    const created = await admin(first.url, 'POST', '/admin/v1/companies', { name: 'Kept' })
    t.equal(created.status, 201)
    const company = (await created.json()) as { id: string }

    let output = 'STARTED'
    try {
      const second = await startGatewayProcess(env, { waitFor: 'listening', timeoutMs: 180_000 })
      await second.stop()
    } catch (error) {
      output = (error as Error).message
    }
    t.match(output, /exited \(1\)/, 'a second serve does not start')
    t.match(output, new RegExp(`DATA_DIR ${DATA_DIR} is in use by another chat-auth process \\(pid ${first.pid}\\)`), 'and says by which process')

    const migrate = spawnSync(process.execPath, [CLI, 'migrate'], { env: { PATH: process.env.PATH, DATA_DIR }, encoding: 'utf8' })
    t.equal(migrate.status, 1, '`chat-auth migrate` on the folder in use is refused too')
    t.match(migrate.stderr, /is in use by another chat-auth process/)
    t.equal((await admin(first.url, 'GET', `/admin/v1/companies/${company.id}`)).status, 200, 'the owner keeps serving')

    await first.kill9()
    const next = await startGatewayProcess(env, { teardown: t.teardown.bind(t), timeoutMs: 180_000 })
    t.equal((await admin(next.url, 'GET', `/admin/v1/companies/${company.id}`)).status, 200, 'after kill -9 the next process starts at once, with the data')
  })

  t.test('in one process too, a folder opens once at a time', async (t) => {
    const dir = await migratedDataDir(t)
    const db = await createPgliteDb(dir)
    await t.rejects(createPgliteDb(dir), { name: 'DataDirInUseError', message: new RegExp(`\\(pid ${process.pid}\\)`) })
    await db.close()
    const again = await createPgliteDb(dir)
    t.same(await again.query('SELECT 1 AS one'), [{ one: 1 }], 'closing releases the folder')
    await again.close()
  })

  t.test('concurrent starts on one folder: exactly one wins', async (t) => {
    const dir = await migratedDataDir(t)
    const results = await Promise.allSettled([createPgliteDb(dir), createPgliteDb(dir), createPgliteDb(dir)])
    const opened = results.filter((r) => r.status === 'fulfilled')
    t.equal(opened.length, 1, 'one opens the folder')
    t.equal(results.filter((r) => r.status === 'rejected' && (r.reason as Error).name === 'DataDirInUseError').length, 2, 'the others are told it is in use')
    for (const r of opened) await (r as PromiseFulfilledResult<Awaited<ReturnType<typeof createPgliteDb>>>).value.close()
  })
}
