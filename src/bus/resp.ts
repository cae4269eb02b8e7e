/**
 * Just enough RESP2 for a subscriber connection: encode commands, decode replies
 * incrementally, in order. The invalidation bus owns its subscriber socket outright (one
 * socket per connection generation, no hidden reconnects, no commands carried from one
 * connection over to the next), which is why it does not use a general client for it.
 */
export type RespValue = string | number | null | RespError | RespValue[]

export class RespError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'RespError'
  }
}

export function encodeCommand(args: readonly string[]): Buffer {
  let text = `*${args.length}\r\n`
  for (const arg of args) text += `$${Buffer.byteLength(arg)}\r\n${arg}\r\n`
  return Buffer.from(text)
}

const INCOMPLETE = Symbol('incomplete')

/** Feeds bytes in, hands complete replies out in arrival order. Throws on a malformed stream. */
export class RespDecoder {
  private buffer: Buffer = Buffer.alloc(0)
  private offset = 0
  /** chunks not yet joined to `buffer`: a large message is joined once, not once per chunk */
  private chunks: Buffer[] = []
  private buffered = 0
  /** bytes (from `offset`) the incomplete reply needs at least */
  private need = 0

  constructor(private readonly maxBulkBytes = 64 * 1024 * 1024) {}

  push(chunk: Buffer, onReply: (reply: RespValue) => void): void {
    this.chunks.push(chunk)
    this.buffered += chunk.length
    if (this.buffer.length - this.offset + this.buffered < this.need) return
    this.buffer = Buffer.concat([this.buffer.subarray(this.offset), ...this.chunks])
    this.chunks = []
    this.buffered = 0
    this.offset = 0
    this.need = 0
    for (;;) {
      const start = this.offset
      const value = this.parse()
      if (value === INCOMPLETE) {
        this.need = Math.max(0, this.need - start)
        this.offset = start
        return
      }
      onReply(value)
    }
  }

  private parse(): RespValue | typeof INCOMPLETE {
    const line = this.line()
    if (line === undefined) return INCOMPLETE
    const type = line[0]
    const rest = line.slice(1)
    switch (type) {
      case '+':
        return rest
      case '-':
        return new RespError(rest)
      case ':':
        return Number(rest)
      case '$': {
        const length = integer(rest)
        if (length < 0) return null
        if (length > this.maxBulkBytes) throw new Error(`RESP bulk string of ${length} bytes is over the limit`)
        if (this.buffer.length < this.offset + length + 2) {
          this.need = this.offset + length + 2
          return INCOMPLETE
        }
        const text = this.buffer.toString('utf8', this.offset, this.offset + length)
        this.offset += length + 2
        return text
      }
      case '*': {
        const count = integer(rest)
        if (count < 0) return null
        const items: RespValue[] = []
        for (let i = 0; i < count; i++) {
          const item = this.parse()
          if (item === INCOMPLETE) return INCOMPLETE
          items.push(item)
        }
        return items
      }
      default:
        throw new Error(`malformed RESP: unexpected type byte ${JSON.stringify(type)}`)
    }
  }

  private line(): string | undefined {
    const end = this.buffer.indexOf('\r\n', this.offset)
    if (end < 0) return undefined
    const text = this.buffer.toString('latin1', this.offset, end)
    this.offset = end + 2
    return text
  }
}

function integer(text: string): number {
  if (!/^-?[0-9]+$/.test(text)) throw new Error(`malformed RESP length ${JSON.stringify(text)}`)
  return Number(text)
}
