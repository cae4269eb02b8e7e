import { randomBytes } from 'node:crypto'
import type { NodeBoard, NodeStatusRecord, Question } from '../bus.js'
import type { MessageCodec } from '../messages/messages.js'
import type { Registry } from './registry.js'

/**
 * SPEC §10.2 over Redis: what the live nodes say of themselves (GET /admin/v1/nodes), and
 * their answers to a question asked of them all (the revocation preview's open sessions).
 *
 * Each node writes its status, a small JSON, into one hash beside the registry every second;
 * a listing reads the statuses of the nodes the registry holds live, in one script (a node
 * that left or died drops out with its registration). A question goes out on a channel of
 * its own, authenticated like a change, and each node answers on the asker's ack channel; the
 * asker waits for the nodes registered when it asked, at most `waitMs`, and says how many
 * answered. A node of an older version subscribes to no question: it never answers.
 */
export interface BoardOptions {
  registry: Pick<Registry, 'writeStatus' | 'statuses' | 'publishQuestion' | 'publishAck'>
  codec: MessageCodec
  nodeId: string
  ackChannelOf(node: string): string
  /** how long a question waits for the answers */
  waitMs: number
  warn(what: string, fields: Record<string, unknown>): void
}

export interface Board extends NodeBoard {
  /** a question arrived on the question channel */
  questioned(payload: string): void
  /** an answer arrived on our ack channel */
  answered(payload: string): void
}

interface Asked {
  readonly counts: Map<string, number>
  done: (() => void) | undefined
}

export function createBoard(options: BoardOptions): Board {
  const { registry, codec, nodeId } = options
  const asked = new Map<string, Asked>()
  let answerer: ((question: Question) => number) | undefined

  return {
    publish(status) {
      registry.writeStatus(JSON.stringify(status)).catch((error: Error) => options.warn('node status not written', { err: error.message }))
    },
    async statuses(): Promise<NodeStatusRecord[]> {
      const live = await registry.statuses()
      return live.map(({ nodeId: id, status }) => ({ nodeId: id, status: status === undefined ? undefined : parseStatus(status) }))
    },
    onQuestion(handler) {
      answerer = handler
    },
    async ask(question) {
      const id = `${nodeId}.q.${randomBytes(6).toString('base64url')}`
      const entry: Asked = { counts: new Map(), done: undefined }
      asked.set(id, entry)
      try {
        const nodes = await registry.publishQuestion(codec.question({ id, from: nodeId, ...question }))
        const others = nodes.filter((node) => node !== nodeId)
        if (answerer !== undefined && nodes.includes(nodeId)) entry.counts.set(nodeId, answerer(question))
        await new Promise<void>((resolve) => {
          const complete = () => others.every((node) => entry.counts.has(node))
          if (complete()) return resolve()
          const timer = setTimeout(resolve, options.waitMs)
          entry.done = () => {
            if (!complete()) return
            clearTimeout(timer)
            resolve()
          }
        })
        let total = 0
        for (const node of nodes) total += entry.counts.get(node) ?? 0
        return { total, nodes: nodes.length, answered: nodes.filter((node) => entry.counts.has(node)).length }
      } finally {
        asked.delete(id)
      }
    },
    questioned(payload) {
      const read = codec.readQuestion(payload)
      if (!read.ok) return options.warn('question refused', { reason: read.reason })
      const { id, from } = read.message
      if (from === nodeId || answerer === undefined) return
      const count = answerer(read.message)
      registry.publishAck(options.ackChannelOf(from), codec.answer({ id, node: nodeId, count })).catch((error: Error) => options.warn('answer not sent', { err: error.message }))
    },
    answered(payload) {
      const read = codec.readAnswer(payload)
      if (!read.ok) return options.warn('answer refused', { reason: read.reason })
      const answer = read.message
      const entry = asked.get(answer.id)
      if (entry === undefined || entry.counts.has(answer.node)) return
      entry.counts.set(answer.node, answer.count)
      entry.done?.()
    },
  }
}

/** What another node wrote as its status; undefined when it is not JSON (a stale or foreign field). */
function parseStatus(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined
  } catch {
    return undefined
  }
}

/** An answer to a question, by its type (messages.ts writes `v` and `t` first): it shares the ack channel with the acks. */
export const isAnswer = (payload: string): boolean => payload.startsWith('{"v":1,"t":"r"')
