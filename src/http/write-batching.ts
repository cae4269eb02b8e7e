import type { Socket } from 'node:net'
import type { Server } from 'node:http'
import type { SocketWrites, WriteHolder } from './node-internals.js'

/**
 * The answers written during one turn of the event loop leave together, at the end of the
 * turn (in `setImmediate`), instead of one `writev` at a time as each handler finishes.
 *
 * Why: the callers of this service are on the same host more often than not (nginx
 * `auth_request`, Envoy, a chat backend as a sidecar), and on a virtual machine each answer
 * written while the caller sleeps costs a cross-CPU wake-up in the writer's system call. In
 * the token path that was 4.5 µs of the node's 43.5 µs a request (`perf record` of
 * issue-existing, bench/RESULTS.md); written together, the answers of one turn wake the
 * caller once. The system calls are the same, one per socket; what changes is when they are
 * made: at most the rest of the turn later (the other handlers of the same turn).
 *
 * How: each connection's `_write`/`_writev` (the methods a Writable stream's implementation
 * provides, which `net.Socket` defines) queue the write, and the turn's end makes them all
 * through net.Socket's own. Those are Node's private methods: node-internals.ts holds a
 * socket's writes and makes them where the start-up check found them as expected, and
 * elsewhere (`socketWrites` undefined) answers are written as they are ready. A stream hands
 * its implementation one write at a time and waits for its callback, so each socket's bytes
 * keep their order. A socket destroyed before its
 * turn ends (an answered request whose body then broke, a timeout after the answer, a peer
 * gone) first makes the writes it queued, then closes: the answer leaves before the close,
 * as it did unbatched, and to a peer that is gone the write fails as it would have.
 * `HTTP_WRITE_BATCHING=false` turns it off.
 */
export function batchWrites(server: Server, socketWrites: SocketWrites | undefined): boolean {
  if (socketWrites === undefined) return false
  writes = socketWrites
  server.on('connection', (socket: Socket) => socketWrites.hold(socket, holder))
  return true
}

/**
 * A connection whose writes must leave as they are made: an event stream's writes are not the
 * answers of one turn, and the event of a change must be in the kernel's hands before the node
 * acknowledges that change (SPEC §8.2), which a write held to the turn's end is not. What the
 * socket queued is written first, in order; then its own methods are net.Socket's again.
 */
export function writeAsReady(socket: Socket): void {
  if (writes === undefined || !writes.holds(socket, holder)) return
  makeQueuedWrites(socket)
  writes.release(socket)
}

type Callback = (error?: Error | null) => void

// Where held writes are made: the same for every server of the process (the start-up check's).
let writes: SocketWrites | undefined

interface QueuedWrite {
  /** null once written (by its socket's destroy, before the turn's end) */
  socket: Socket | null
  writev: boolean
  data: unknown
  encoding: string
  cb: Callback
}

// One queue for the whole process: the writes of one turn, in the order they were made.
let queued: QueuedWrite[] = []

const holder: WriteHolder = {
  write(this: Socket, data: unknown, encoding: BufferEncoding, cb: Callback): void {
    enqueue({ socket: this, writev: false, data, encoding, cb })
  },
  writev(this: Socket, chunks: Array<{ chunk: unknown; encoding: BufferEncoding }>, cb: Callback): void {
    enqueue({ socket: this, writev: true, data: chunks, encoding: '', cb })
  },
  /** net.Socket's _destroy (which closes the handle), after the socket's queued writes are made. */
  destroy(this: Socket, error: Error | null, cb: Callback): void {
    makeQueuedWrites(this)
    writes!.destroy(this, error, cb)
  },
}

function enqueue(write: QueuedWrite): void {
  if (queued.push(write) === 1) setImmediate(flush)
}

function flush(): void {
  // A write made while these are made (by a callback) waits for the next turn's end.
  const batch = queued
  queued = []
  for (const write of batch) {
    if (write.socket !== null) writes!.make(write.socket, write.writev, write.data, write.encoding, write.cb)
  }
}

function makeQueuedWrites(socket: Socket): void {
  for (const write of queued) {
    if (write.socket !== socket) continue
    write.socket = null
    writes!.make(socket, write.writev, write.data, write.encoding, write.cb)
  }
}
