import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { mkdir, rmdir, stat, unlink } from 'node:fs/promises'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/**
 * One store, one owner: the embedded PostgreSQL (PGlite) in DATA_DIR belongs to one process.
 * Two processes on one folder each keep their own copy in memory and overwrite each other's
 * files: users made through one are unknown to the other and gone after a restart.
 *
 * The owner listens on a Unix socket in the folder and answers its pid to whoever connects.
 * The kernel closes the socket when the process dies, however it dies, so a lock left by a
 * `kill -9` is recognised (connecting is refused) and taken over; no pid file can tell a dead
 * owner from a live one that well (pids are reused, containers restart as pid 1).
 */
export class DataDirInUseError extends Error {
  constructor(
    readonly dataDir: string,
    readonly pid: number | undefined,
  ) {
    super(
      `DATA_DIR ${dataDir} is in use by another chat-auth process${pid === undefined ? '' : ` (pid ${pid})`}: ` +
        'the embedded store serves one process. Stop that process, or give this one another DATA_DIR ' +
        '(several nodes need DATABASE_URL and REDIS_URL)',
    )
    this.name = 'DataDirInUseError'
  }
}

export interface DataDirLock {
  release(): Promise<void>
}

const LOCK_NAME = '.chat-auth.lock'
/** sun_path holds 108 bytes on Linux, 104 on macOS */
const MAX_SOCKET_PATH = 100
/** a takeover guard older than this was left by a process that died in those few microseconds */
const STALE_GUARD_MS = 10_000

export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const path = socketPath(dataDir)
  const guard = join(dataDir, LOCK_NAME + '.takeover')
  for (let attempt = 0; ; attempt++) {
    const server = net.createServer((socket) => socket.end(JSON.stringify({ pid: process.pid }) + '\n'))
    server.unref() // the lock never keeps the process alive
    try {
      server.listen(path)
      await once(server, 'listening')
      return { release: () => new Promise<void>((resolve) => server.close(() => resolve())) }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error
    }
    const owner = await askOwner(path)
    if (owner.alive) throw new DataDirInUseError(dataDir, owner.pid)
    // The owner is gone. Only one process may remove its socket, or two could each remove
    // the other's fresh one: the takeover happens under a guard folder.
    if (await takeGuard(guard)) {
      try {
        if (!(await askOwner(path)).alive) await unlink(path).catch(() => {})
      } finally {
        await rmdir(guard).catch(() => {})
      }
    } else {
      await new Promise((resolve) => setTimeout(resolve, 20 + attempt * 10))
    }
    if (attempt > 200) throw new DataDirInUseError(dataDir, undefined)
  }
}

function socketPath(dataDir: string): string {
  const path = join(dataDir, LOCK_NAME)
  if (Buffer.byteLength(path) <= MAX_SOCKET_PATH) return path
  // A folder too deep for a socket path: a name derived from it, in the kernel's abstract
  // namespace on Linux (no file at all), in the temporary folder elsewhere.
  const name = 'chat-auth-' + createHash('sha256').update(dataDir).digest('hex').slice(0, 32)
  return process.platform === 'linux' ? '\0' + name : join(tmpdir(), name + '.sock')
}

/** Connects to the lock's socket: a live owner answers its pid; a dead one refuses. */
async function askOwner(path: string): Promise<{ alive: boolean; pid?: number }> {
  return new Promise((resolve) => {
    const socket = net.connect(path)
    let answer = ''
    socket.setEncoding('utf8')
    socket.setTimeout(2000, () => socket.destroy())
    socket.on('data', (chunk: string) => (answer += chunk))
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // ECONNREFUSED: nobody listens (the owner died); ENOENT: the socket is gone already.
      resolve(error.code === 'ECONNREFUSED' || error.code === 'ENOENT' ? { alive: false } : { alive: true })
    })
    socket.on('close', (hadError) => {
      if (hadError) return
      let pid: number | undefined
      try {
        pid = (JSON.parse(answer) as { pid?: number }).pid
      } catch {}
      resolve({ alive: true, pid })
    })
  })
}

async function takeGuard(guard: string): Promise<boolean> {
  try {
    await mkdir(guard)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error
    const age = await stat(guard).then(
      (info) => Date.now() - info.mtimeMs,
      () => 0,
    )
    if (age > STALE_GUARD_MS) await rmdir(guard).catch(() => {})
    return false
  }
}
