/**
 * Loaded into a node with `--import` (bench/event-fanout.ts, through NODE_OPTIONS): notes, for
 * every `tokens.invalidated` event the node hands to an event stream's socket, the subject and
 * the time (ms since the epoch, the clock every process on the machine shares), one line per
 * stream, in the file STREAM_WRITE_PROBE_FILE. It changes no byte written: the bench compares
 * these times with the time the revoking call answered, stream by stream.
 */
import { appendFileSync } from 'node:fs'
import { ServerResponse } from 'node:http'
import { performance } from 'node:perf_hooks'

const file = process.env.STREAM_WRITE_PROBE_FILE
if (file) {
  let lines: string[] = []
  const flush = () => {
    if (lines.length) appendFileSync(file, lines.join(''))
    lines = []
  }
  setInterval(flush, 100).unref()
  process.on('exit', flush)
  const write = ServerResponse.prototype.write as (this: ServerResponse, chunk: unknown, ...rest: unknown[]) => boolean
  ServerResponse.prototype.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
    if (typeof chunk === 'string' && chunk.includes('\nevent: tokens.invalidated\n')) {
      const at = performance.timeOrigin + performance.now()
      const data = /\ndata: (.*)\n/.exec(chunk)?.[1]
      const subject = data === undefined ? undefined : (JSON.parse(data) as { subject?: { id?: string } }).subject?.id
      if (subject !== undefined) lines.push(`${subject} ${at.toFixed(3)}\n`)
    }
    return write.call(this, chunk, ...rest)
  } as typeof ServerResponse.prototype.write
}
