import { cpSync, existsSync, statfsSync } from 'node:fs'
import { mkdtemp, rename, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createPgliteDb } from '../../src/store/db.js'
import type { Teardown } from './databases.js'
import { template, templateKey } from './pglite-template.js'

/**
 * A migrated PGlite DATA_DIR on disk, for a node process (or an in-process store) whose first
 * start is not what the test is about; removed when the test ends. A process on an empty folder
 * spends seconds of CPU on initdb in WASM and the migrations; this folder is a copy of one made
 * once per machine from the migrated template (pglite-template.ts), kept next to it in the temp
 * folder under the same name.
 */
export async function migratedDataDir(t: Teardown): Promise<string> {
  const source = await templateDir()
  const dir = await mkdtemp(join(scratchFolder(), 'chat-auth-data-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  // sync: half the CPU of fs/promises' cp
  cpSync(source, dir, { recursive: true })
  return dir
}

let scratch: string | undefined

/**
 * Where the copies go: a RAM-backed folder (/dev/shm, on Linux) when it has room, else the
 * temp folder. Writing the 40 MB of a copy to a disk-backed folder cost the 2-core test machine
 * 0.3 to 1 s of kernel CPU, growing with each copy; to /dev/shm, 0.05 s. The node's own writes
 * to its store are cheaper there too.
 */
function scratchFolder(): string {
  if (scratch === undefined) {
    scratch = tmpdir()
    try {
      const { bavail, bsize } = statfsSync('/dev/shm')
      if (bavail * bsize > 2 ** 30) scratch = '/dev/shm'
    } catch {
      // no /dev/shm: the temp folder
    }
  }
  return scratch
}

let cached: Promise<string> | undefined

function templateDir(): Promise<string> {
  cached ??= loadOrMakeTemplateDir()
  return cached
}

async function loadOrMakeTemplateDir(): Promise<string> {
  const dir = join(tmpdir(), `chat-auth-test-pglite-${await templateKey()}.d`)
  if (existsSync(dir)) return dir
  // Made under a name of this process's own, then renamed into place whole: a folder that
  // exists under the final name is complete, and a process racing us keeps its own.
  const partial = `${dir}.${process.pid}`
  await rm(partial, { recursive: true, force: true })
  const db = await createPgliteDb(partial, { loadDataDir: await template() })
  await db.close()
  try {
    await rename(partial, dir)
  } catch (error) {
    await rm(partial, { recursive: true, force: true })
    if (!existsSync(dir)) throw error
  }
  return dir
}
