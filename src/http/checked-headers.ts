import { validateHeaderName, validateHeaderValue } from 'node:http'

/**
 * Headers checked once and written many times. Node checks every header name and value
 * handed to `writeHead`, on every response, with two regular expressions each: for a
 * verification's seven headers that was ~5 % of its instructions (bench/RESULTS.md,
 * "Instructions per request"). The headers a response already holds (set with `setHeader`, which checked
 * them when they were set) are written without that check; Node keeps them as
 * `lower-case name → [name, value]`. A verify answer's headers are checked here, once, when
 * the answer is prepared, in that form (`held`) and as pairs; node-internals.ts places the
 * first where the response keeps its headers, or hands `writeHead` the pairs where this Node
 * does not allow that. test/in-process/verify/checked-headers.test.ts and test/in-process/verify/node-internals.test.ts
 * pin that both ways put the same bytes on the wire.
 */
export interface CheckedHeaders {
  /** name, value, name, value…: what `writeHead` is handed on the public way */
  readonly pairs: readonly string[]
  /** lower-case name → [name, value], as a response keeps the headers it holds */
  readonly held: Readonly<Record<string, readonly [string, string]>>
}

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
