import { Socket } from 'node:net'
import type { Server } from 'node:http'

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
 * through net.Socket's own. A stream hands its implementation one write at a time and waits
 * for its callback, so each socket's bytes keep their order. A socket destroyed before its
 * turn ends (an answered request whose body then broke, a timeout after the answer, a peer
 * gone) first makes the writes it queued, then closes: the answer leaves before the close,
 * as it did unbatched, and to a peer that is gone the write fails as it would have.
 * `HTTP_WRITE_BATCHING=false` turns it off.
 */
export function batchWrites(server: Server): void {
  // Node's own methods, not its public API: where a Node version lacks them, answers are
  // written as they are ready (test/api/write-batching.test.ts fails on such a version).
  if (typeof writeGeneric !== 'function' || typeof socketDestroy !== 'function') return
  server.on('connection', (socket: Socket) => {
    socket._write = queueWrite
    socket._writev = queueWritev
    socket._destroy = destroyAfterQueuedWrites
  })
}

/**
 * A connection whose writes must leave as they are made: an event stream's writes are not the
 * answers of one turn, and the event of a change must be in the kernel's hands before the node
 * acknowledges that change (SPEC §8.2), which a write held to the turn's end is not. What the
 * socket queued is written first, in order; then its own methods are net.Socket's again.
 */
export function writeAsReady(socket: Socket): void {
  if (socket._write !== queueWrite) return
  for (const write of queued) {
    if (write.socket !== socket) continue
    write.socket = null
    writeGeneric.call(socket, write.writev, write.data, write.encoding, write.cb)
  }
  // The own properties gone, the prototype's (net.Socket's) methods answer again.
  delete (socket as Partial<Socket>)._write
  delete (socket as Partial<Socket>)._writev
  delete (socket as Partial<Socket>)._destroy
}

type Callback = (error?: Error | null) => void

// net.Socket's own implementation, which both of its methods call, and its own _destroy.
const writeGeneric = (Socket.prototype as unknown as { _writeGeneric(writev: boolean, data: unknown, encoding: string, cb: Callback): void })._writeGeneric
const socketDestroy = Socket.prototype._destroy

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

function queueWrite(this: Socket, data: unknown, encoding: BufferEncoding, cb: Callback): void {
  enqueue({ socket: this, writev: false, data, encoding, cb })
}

function queueWritev(this: Socket, chunks: Array<{ chunk: unknown; encoding: BufferEncoding }>, cb: Callback): void {
  enqueue({ socket: this, writev: true, data: chunks, encoding: '', cb })
}

function enqueue(write: QueuedWrite): void {
  if (queued.push(write) === 1) setImmediate(flush)
}

function flush(): void {
  // A write made while these are made (by a callback) waits for the next turn's end.
  const batch = queued
  queued = []
  for (const write of batch) {
    if (write.socket !== null) writeGeneric.call(write.socket, write.writev, write.data, write.encoding, write.cb)
  }
}

/** net.Socket's _destroy (which closes the handle), after the socket's queued writes are made. */
function destroyAfterQueuedWrites(this: Socket, error: Error | null, cb: Callback): void {
  for (const write of queued) {
    if (write.socket !== this) continue
    write.socket = null
    writeGeneric.call(this, write.writev, write.data, write.encoding, write.cb)
  }
  socketDestroy.call(this, error, cb)
}
