import { describe, invalidArgument, pathSegment } from './input.js'

/** Options of one call. */
export interface CallOptions {
  /** aborts the call (and its retries) */
  signal?: AbortSignal
}

/** An id as one path segment; not a string, or not well-formed text, is INVALID_ARGUMENT. */
export const id = (value: string) => pathSegment(value, 'an id')

/** A string argument; anything else is INVALID_ARGUMENT, sent nowhere. */
export function text(value: unknown, what: string): string {
  if (typeof value !== 'string') throw invalidArgument(`${what} must be a string, not ${describe(value)}`)
  return value
}
