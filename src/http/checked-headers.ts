import { OutgoingMessage, validateHeaderName, validateHeaderValue, type ServerResponse } from 'node:http'

/**
 * Headers checked once and written many times. Node checks every header name and value
 * handed to `writeHead`, on every response, with two regular expressions each: for a
 * verification's seven headers that was ~5 % of its instructions (bench/RESULTS.md,
 * "Instructions per request"). The headers a response already holds (set with `setHeader`, which checked
 * them when they were set) are written without that check; Node keeps them under its own
 * symbol `kOutHeaders`, as `lower-case name → [name, value]`. A verify answer's headers are
 * checked here, once, when the answer is prepared, and placed there for each response.
 *
 * The symbol is Node's, not a public API: it is looked up once, by its description, and
 * where it is missing (or a response already holds headers of its own) `writeHead` gets the
 * pairs and checks them as always. test/api/checked-headers.test.ts pins that this Node has it
 * and that both ways put the same bytes on the wire.
 */
export interface CheckedHeaders {
  /** name, value, name, value…: what `writeHead` is handed when the symbol cannot be used */
  readonly pairs: readonly string[]
  readonly held: Readonly<Record<string, readonly [string, string]>>
}

export const heldHeadersSymbol: symbol | undefined = Object.getOwnPropertySymbols(new OutgoingMessage()).find((symbol) => symbol.description === 'kOutHeaders')

/** Throws Node's own errors (ERR_INVALID_HTTP_TOKEN, ERR_INVALID_CHAR) for a header it would refuse. */
export function checkHeaders(pairs: readonly string[]): CheckedHeaders {
  // an ordinary object, not Node's prototype-less one: V8 keeps it in fast mode, and Node's
  // loop over it (for…in) reads it from its enumeration cache
  const held: Record<string, readonly [string, string]> = {}
  for (let i = 0; i < pairs.length; i += 2) {
    const name = pairs[i]!
    const value = pairs[i + 1]!
    validateHeaderName(name)
    validateHeaderValue(name, value)
    const key = name.toLowerCase()
    // one name twice would be written once here and twice by writeHead
    if (Object.hasOwn(held, key)) throw new Error(`the header ${name} is given twice`)
    held[key] = Object.freeze([name, value] as const)
  }
  // Frozen: shared by every response of the answer, and nothing may change it once headers
  // are sent (Node's setHeader and removeHeader refuse then). Were something to try, it
  // throws rather than change another user's answer.
  return { pairs: Object.freeze([...pairs]), held: Object.freeze(held) }
}

export function writeCheckedHead(response: ServerResponse, status: number, headers: CheckedHeaders): void {
  const holder = response as unknown as Record<symbol, unknown>
  if (heldHeadersSymbol !== undefined && holder[heldHeadersSymbol] === null) {
    holder[heldHeadersSymbol] = headers.held
    response.writeHead(status)
  } else {
    response.writeHead(status, headers.pairs as string[])
  }
}
