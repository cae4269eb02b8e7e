import { createHash } from 'node:crypto'

/**
 * A strong entity tag of a representation's bytes (RFC 9110 §8.8.3): the same bytes, the
 * same tag on every node, with no state to share. 128 bits of SHA-256, base64url.
 */
export function entityTag(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`
}

// An entity-tag as RFC 9110 §8.8.3 writes it: an optional W/ and a quoted opaque tag, which
// may itself hold commas, so a list is read tag by tag, never split on commas.
const ENTITY_TAG = /(?:W\/)?("[\x21\x23-\x7e\x80-\xff]*")/g

/**
 * RFC 9110 §13.1.2: whether `If-None-Match` names the current representation, whose strong
 * tag is `etag`: `*`, or any tag of the list by the weak comparison (W/ ignored on both
 * sides). A GET that matches is answered 304. Anything unreadable in the header matches
 * nothing: the client gets the whole answer.
 */
export function ifNoneMatchHits(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false
  if (header.trim() === '*') return true
  const opaque = etag.startsWith('W/') ? etag.slice(2) : etag
  for (const [, tag] of header.matchAll(ENTITY_TAG)) if (tag === opaque) return true
  return false
}
