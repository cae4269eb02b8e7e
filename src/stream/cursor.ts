import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * The event stream's cursor (SPEC §8.2): where a subscriber is in a company's events, in
 * commit order rather than id order (migrations/009_event_xid.sql).
 *
 * A read returns the events a snapshot `base` did not see and a later snapshot `upTo` saw,
 * oldest id first. After its i-th event, the subscriber has seen: everything `base` saw, and
 * those events `upTo` saw with an id up to the i-th's. That is the cursor: (base, upTo, id).
 * After a read's last event it is the same as `upTo` alone, and a subscriber that received
 * nothing yet holds a bare snapshot. A snapshot is PostgreSQL's text form
 * `xmin:xmax:xip,…`.
 *
 * On the wire it is opaque and bound to its company: base64url of the position and a MAC
 * over (company, position) with a secret kept in the store, so every node reads every
 * other's cursors and a cursor of another company, or a made-up one, is refused.
 */
export interface Position {
  base: string
  upTo?: string
  id?: string
}

const SNAPSHOT_RE = /^\d{1,20}:\d{1,20}:(\d{1,20}(,\d{1,20})*)?$/
const ID_RE = /^\d{1,19}$/
const MAC_BYTES = 16
const MAX_CURSOR_CHARS = 8192

const macOf = (secret: Buffer, companyId: string, payload: string) => createHmac('sha256', secret).update(`${companyId}|${payload}`).digest().subarray(0, MAC_BYTES)

const payloadOf = (position: Position) => (position.upTo === undefined ? position.base : `${position.base}|${position.upTo}|${position.id}`)

export function encodeCursor(secret: Buffer, companyId: string, position: Position): string {
  const payload = payloadOf(position)
  return `${Buffer.from(payload).toString('base64url')}.${macOf(secret, companyId, payload).toString('base64url')}`
}

/** The payload of a cursor MACed for this company, or undefined. */
function verified(secret: Buffer, companyId: string, cursor: string): string | undefined {
  if (cursor.length > MAX_CURSOR_CHARS) return undefined
  const [encoded, mac, extra] = cursor.split('.')
  if (encoded === undefined || mac === undefined || extra !== undefined) return undefined
  const payload = Buffer.from(encoded, 'base64url').toString()
  const presented = Buffer.from(mac, 'base64url')
  if (presented.length !== MAC_BYTES || !timingSafeEqual(presented, macOf(secret, companyId, payload))) return undefined
  return payload
}

/** The position a cursor names, or undefined when it is not a cursor of this company. */
export function decodeCursor(secret: Buffer, companyId: string, cursor: string): Position | undefined {
  const payload = verified(secret, companyId, cursor)
  if (payload === undefined) return undefined
  const [base, upTo, id, more] = payload.split('|')
  if (base === undefined || more !== undefined || !SNAPSHOT_RE.test(base)) return undefined
  if (upTo === undefined) return { base }
  if (!SNAPSHOT_RE.test(upTo) || id === undefined || !ID_RE.test(id)) return undefined
  return { base, upTo, id }
}

/**
 * The listing's `before` (SPEC §7.2): the snapshot of its first page and the last id shown.
 * Every page reads that snapshot, so a walk through the pages shows exactly the events
 * committed when it began, each once, whatever order their transactions committed in; what
 * committed since is had from the page's `cursor` (a position, as above) with `after`.
 */
export function encodePageCursor(secret: Buffer, companyId: string, snapshot: string, id: string): string {
  const payload = `before|${snapshot}|${id}`
  return `${Buffer.from(payload).toString('base64url')}.${macOf(secret, companyId, payload).toString('base64url')}`
}

export function decodePageCursor(secret: Buffer, companyId: string, cursor: string): { snapshot: string; id: string } | undefined {
  const payload = verified(secret, companyId, cursor)
  const [kind, snapshot, id, more] = payload?.split('|') ?? []
  if (kind !== 'before' || snapshot === undefined || !SNAPSHOT_RE.test(snapshot) || id === undefined || !ID_RE.test(id) || more !== undefined) return undefined
  return { snapshot, id }
}
