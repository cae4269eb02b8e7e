import { createHmac, createPrivateKey, hkdfSync, timingSafeEqual } from 'node:crypto'
import { Type, type Static } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import type { JwtKeyConfig } from '../../config.js'
import type { RowChanged } from '../../domain.js'

/**
 * The two messages of the bus, their wire format, and their authentication.
 *
 * - change `{v, t: "c", id, from, kind, row, rev, mac}`: "row (kind, row) changed at
 *   revision rev" — no state, so the worst a message can do is evict a cached row.
 * - question `{v, t: "q", id, from, scope, key, mac}` (its own channel): "how many open
 *   sessions of this company (agent) do you hold?"; answer `{v, t: "r", id, node, count, mac}`
 *   on the asker's ack channel (SPEC §10.2's preview).
 * - ack `{v, t: "a", id, node, ended, mac}`: "node applied message id, and it ended `ended`
 *   open sessions" (a receipt's line, SPEC §10.2; nodes before receipts sent no `ended`).
 *
 * `mac` holds one HMAC-SHA-256 per bus key of the sender, tagged with that key's public
 * tag; a receiver accepts a message when one tag it knows carries a correct MAC. Each MAC
 * covers the message type, the deployment's prefix and every field, so an ack is bound to
 * one message id and one node id, and nothing moves between deployments or message types.
 */
export interface BusKey {
  /** public name of the key: a MAC of a constant, so it tells nothing about the key */
  readonly tag: string
  readonly secret: Buffer
}

export type Rejection = 'malformed' | 'unknown_key' | 'bad_mac'

export type ReadResult<T> = { ok: true; message: T } | { ok: false; reason: Rejection }

export interface ChangeMessage {
  id: string
  from: string
  row: RowChanged
}

export interface AckMessage {
  /** the id of the change message acknowledged */
  id: string
  node: string
  /** open sessions the change ended on that node (undefined: a node that does not say) */
  ended?: number | undefined
}

/** A question asked of every node (SPEC §10.2's preview): how many open sessions of this company or agent. */
export interface QuestionMessage {
  id: string
  from: string
  scope: 'company' | 'agent'
  key: string
}

/** One node's answer to a question, sent on the asker's ack channel. */
export interface AnswerMessage {
  id: string
  node: string
  count: number
}

export interface MessageCodec {
  change(message: ChangeMessage): string
  ack(message: AckMessage): string
  question(message: QuestionMessage): string
  answer(message: AnswerMessage): string
  readChange(payload: string): ReadResult<ChangeMessage>
  readAck(payload: string): ReadResult<AckMessage>
  readQuestion(payload: string): ReadResult<QuestionMessage>
  readAnswer(payload: string): ReadResult<AnswerMessage>
}

/** A payload longer than this is not ours (ours are ~200 bytes per key). */
export const MAX_PAYLOAD_BYTES = 4096
const TAG_CHARS = 11
const MAX_KEYS = 8

/**
 * One bus key per JWT key that has secret material (an HS256 secret or a private key; a
 * public key is public). Every node of a deployment signs tokens, so every node holds
 * this material; Redis never does. HKDF keeps the bus key apart from the JWT key: a MAC
 * on the bus is never a JWT signature, and the bus key reveals nothing of the JWT key.
 */
export function deriveBusKeys(keys: readonly JwtKeyConfig[]): BusKey[] {
  const busKeys: BusKey[] = []
  for (const key of keys) {
    const material = keyMaterial(key)
    if (material === undefined) continue
    const secret = Buffer.from(hkdfSync('sha256', material, 'chat-auth invalidation bus', 'message mac v1', 32))
    const tag = createHmac('sha256', secret).update('tag').digest('base64url').slice(0, TAG_CHARS)
    if (!busKeys.some((known) => known.tag === tag)) busKeys.push({ tag, secret })
  }
  return busKeys.slice(0, MAX_KEYS)
}

function keyMaterial(key: JwtKeyConfig): Buffer | undefined {
  if (key.secret !== undefined) return Buffer.from(key.secret, 'utf8')
  // The DER encoding, so that two PEM spellings of one key derive the same bus key.
  if (key.privateKey !== undefined) return createPrivateKey(key.privateKey).export({ format: 'der', type: 'pkcs8' })
  return undefined
}

const Id = Type.String({ minLength: 1, maxLength: 128 })
const Macs = Type.Array(Type.Tuple([Type.String({ minLength: 1, maxLength: 32 }), Type.String({ minLength: 1, maxLength: 64 })]), { minItems: 1, maxItems: MAX_KEYS })
const ChangeWire = Type.Object(
  {
    v: Type.Literal(1),
    t: Type.Literal('c'),
    id: Id,
    from: Id,
    kind: Type.Union([Type.Literal('user'), Type.Literal('agent'), Type.Literal('apiKey'), Type.Literal('company'), Type.Literal('token')]),
    row: Type.String({ minLength: 1, maxLength: 512 }),
    rev: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }),
    mac: Macs,
  },
  { additionalProperties: false },
)
const AckWire = Type.Object(
  { v: Type.Literal(1), t: Type.Literal('a'), id: Id, node: Id, ended: Type.Optional(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER })), mac: Macs },
  { additionalProperties: false },
)
const QuestionWire = Type.Object(
  { v: Type.Literal(1), t: Type.Literal('q'), id: Id, from: Id, scope: Type.Union([Type.Literal('company'), Type.Literal('agent')]), key: Id, mac: Macs },
  { additionalProperties: false },
)
const AnswerWire = Type.Object(
  { v: Type.Literal(1), t: Type.Literal('r'), id: Id, node: Id, count: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), mac: Macs },
  { additionalProperties: false },
)
const changeWire = TypeCompiler.Compile(ChangeWire)
const ackWire = TypeCompiler.Compile(AckWire)
const questionWire = TypeCompiler.Compile(QuestionWire)
const answerWire = TypeCompiler.Compile(AnswerWire)

export function createMessageCodec(prefix: string, keys: readonly BusKey[]): MessageCodec {
  if (keys.length === 0) throw new Error('the invalidation bus needs at least one key')
  const byTag = new Map(keys.map((key) => [key.tag, key.secret]))
  const macs = (fields: Array<string | number>): Array<[string, string]> => {
    const input = JSON.stringify([prefix, ...fields])
    return keys.map((key) => [key.tag, createHmac('sha256', key.secret).update(input).digest('base64url')])
  }
  const check = (fields: Array<string | number>, presented: Array<[string, string]>): Rejection | undefined => {
    const input = JSON.stringify([prefix, ...fields])
    let known = false
    for (const [tag, mac] of presented) {
      const secret = byTag.get(tag)
      if (secret === undefined) continue
      known = true
      const expected = createHmac('sha256', secret).update(input).digest()
      const given = Buffer.from(mac, 'base64url')
      if (given.length === expected.length && timingSafeEqual(given, expected)) return undefined
    }
    return known ? 'bad_mac' : 'unknown_key'
  }
  const changeFields = (m: ChangeMessage) => ['c', m.id, m.from, m.row.kind, m.row.id, m.row.revision]
  // `ended` is covered when present: a node may not claim sessions another ended.
  const questionFields = (m: QuestionMessage) => ['q', m.id, m.from, m.scope, m.key]
  const answerFields = (m: AnswerMessage) => ['r', m.id, m.node, m.count]
  const ackFields = (m: AckMessage) => (m.ended === undefined ? ['a', m.id, m.node] : ['a', m.id, m.node, m.ended])

  return {
    change: (m) => JSON.stringify({ v: 1, t: 'c', id: m.id, from: m.from, kind: m.row.kind, row: m.row.id, rev: m.row.revision, mac: macs(changeFields(m)) } satisfies Static<typeof ChangeWire>),
    ack: (m) => JSON.stringify({ v: 1, t: 'a', id: m.id, node: m.node, ...(m.ended === undefined ? {} : { ended: m.ended }), mac: macs(ackFields(m)) } satisfies Static<typeof AckWire>),
    question: (m) => JSON.stringify({ v: 1, t: 'q', id: m.id, from: m.from, scope: m.scope, key: m.key, mac: macs(questionFields(m)) } satisfies Static<typeof QuestionWire>),
    answer: (m) => JSON.stringify({ v: 1, t: 'r', id: m.id, node: m.node, count: m.count, mac: macs(answerFields(m)) } satisfies Static<typeof AnswerWire>),
    readQuestion(payload) {
      const wire = parse(payload, questionWire)
      if (wire === undefined) return { ok: false, reason: 'malformed' }
      const message: QuestionMessage = { id: wire.id, from: wire.from, scope: wire.scope, key: wire.key }
      const rejection = check(questionFields(message), wire.mac)
      return rejection ? { ok: false, reason: rejection } : { ok: true, message }
    },
    readAnswer(payload) {
      const wire = parse(payload, answerWire)
      if (wire === undefined) return { ok: false, reason: 'malformed' }
      const message: AnswerMessage = { id: wire.id, node: wire.node, count: wire.count }
      const rejection = check(answerFields(message), wire.mac)
      return rejection ? { ok: false, reason: rejection } : { ok: true, message }
    },
    readChange(payload) {
      const wire = parse(payload, changeWire)
      if (wire === undefined) return { ok: false, reason: 'malformed' }
      const message: ChangeMessage = { id: wire.id, from: wire.from, row: { kind: wire.kind, id: wire.row, revision: wire.rev } }
      const rejection = check(changeFields(message), wire.mac)
      return rejection ? { ok: false, reason: rejection } : { ok: true, message }
    },
    readAck(payload) {
      const wire = parse(payload, ackWire)
      if (wire === undefined) return { ok: false, reason: 'malformed' }
      const message: AckMessage = { id: wire.id, node: wire.node, ended: wire.ended }
      const rejection = check(ackFields(message), wire.mac)
      return rejection ? { ok: false, reason: rejection } : { ok: true, message }
    },
  }
}

function parse<T>(payload: string, schema: { Check(value: unknown): value is T }): T | undefined {
  if (payload.length > MAX_PAYLOAD_BYTES) return undefined
  let value: unknown
  try {
    value = JSON.parse(payload)
  } catch {
    return undefined
  }
  return schema.Check(value) ? value : undefined
}
