/**
 * event-fanout: a revocation reaching the event streams (SPEC §8.2) of every node before it answers:
 * 3 nodes (`chat-auth serve`) on one scratch PostgreSQL database and Redis, `--subscribers`
 * SSE clients (the `eventsource` package) spread over them, then `--rounds` invalidations on
 * node 0. For each, the time each subscriber received the `tokens.invalidated` event against
 * the time the invalidate call answered, on this process's clock: how many had it before the
 * answer, how many after (and by how much), how many never within 5 s; and, from the nodes'
 * side (bench/lib/stream-write-probe.ts, loaded into each node), the time each node handed the
 * event to each stream's socket: every one of them must come before the answer (SPEC §8.2).
 * What this one process reads later than the answer is only the order in which its event
 * loop takes the loopback sockets.
 *
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'
import { EventSource } from 'eventsource'
import { createScratchDatabase } from '../../test/support/databases.js'
import { call, setupCompany } from '../../test/support/http-client.js'
import { startGatewayProcess, type GatewayProcess } from '../../test/support/processes.js'
import { common, number } from '../lib/args.js'
import { quantile as q } from '../lib/report.js'
import { defineScenario } from '../lib/scenario.js'

export default defineScenario({
  name: 'event-fanout',
  description: "a revocation reaching every node's event streams (SSE) before its call answers (SPEC §8.2): N subscribers over 3 nodes",
  options: {
    subscribers: number('event streams open, spread over the nodes', { default: 1000, smoke: 10 }),
    invalidations: number('invalidations on node 0, one at a time', { default: 20, smoke: 2 }),
    nodes: number('nodes on one database and Redis', { default: 3, smoke: 2 }),
    pgUrl: common.pgUrl(),
    redisUrl: common.redisUrl(),
  },
  smoke: true,
  async run(ctx) {
    const { subscribers, invalidations: rounds, nodes: nodeCount } = ctx.opts
    const database = await createScratchDatabase(ctx.opts.pgUrl, 'bench_fanout')
    ctx.defer(() => database.drop())
    const probeDir = mkdtempSync(join(tmpdir(), 'bench-fanout-'))
    ctx.defer(() => rmSync(probeDir, { recursive: true, force: true }))
    const probeFile = join(probeDir, 'writes.txt')
    const probe = fileURLToPath(new URL('../lib/stream-write-probe.js', import.meta.url))
    const env = { NODE_OPTIONS: `--import=${probe}`, STREAM_WRITE_PROBE_FILE: probeFile, DATABASE_URL: database.url, REDIS_URL: ctx.opts.redisUrl, REDIS_PREFIX: `bench-fanout-${randomBytes(4).toString('hex')}`, MAX_EVENT_STREAMS: String(subscribers + 10) }
    const nodes: GatewayProcess[] = []
    for (let i = 0; i < nodeCount; i++) {
      const node = await startGatewayProcess(env, { name: `node-${i}` })
      ctx.watch(node)
      ctx.defer(() => node.stop())
      nodes.push(node)
    }
    const key = await setupCompany(nodes[0]!.url)
    const authorization = 'Basic ' + Buffer.from(`${key.keyId}:${key.keySecret}`).toString('base64')

    // subject user id → the times each subscriber received its tokens.invalidated event
    const receipts = new Map<string, number[]>()
    await Promise.all(
      Array.from({ length: subscribers }, (_, i) => {
        const source = new EventSource(`${nodes[i % nodeCount]!.url}/rest/v1/auth/events?types=tokens.invalidated`, {
          fetch: (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization } }),
        })
        ctx.defer(() => source.close())
        source.addEventListener('tokens.invalidated', (event) => {
          const at = performance.now()
          const subject = JSON.parse(event.data).subject?.id as string | undefined
          if (subject !== undefined) receipts.get(subject)?.push(at)
        })
        return new Promise<void>((resolve, reject) => {
          source.onopen = () => resolve()
          source.onerror = (error) => reject(new Error(`a stream did not open: ${error.code} ${error.message}`))
        })
      }),
    )
    ctx.log(`${subscribers} streams open across ${nodeCount} nodes`)

    const before: number[] = []
    const lateMs: number[] = []
    let missing = 0
    const answerMs: number[] = []
    /** subject → when its invalidation answered, ms since the epoch */
    const answeredAt = new Map<string, number>()
    for (let round = 0; round < rounds; round++) {
      const issued = await call(nodes[0]!.url, 'POST', '/rest/v1/auth/token', { keyId: key.keyId, keySecret: key.keySecret, userId: `fanout-${round}` })
      if (issued.status !== 200) throw new Error(`token: ${issued.status}`)
      const userId = issued.body.user.id as string
      const times: number[] = []
      receipts.set(userId, times)
      const started = performance.now()
      const answer = await call(nodes[0]!.url, 'POST', '/rest/v1/auth/invalidate-token', { keyId: key.keyId, keySecret: key.keySecret, customerUserId: userId })
      const answered = performance.now()
      answeredAt.set(userId, performance.timeOrigin + answered)
      if (answer.status !== 200) throw new Error(`invalidate: ${answer.status} ${JSON.stringify(answer.body)}`)
      answerMs.push(answered - started)
      const until = performance.now() + 5000
      while (times.length < subscribers && performance.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
      before.push(times.filter((at) => at <= answered).length)
      for (const at of times) if (at > answered) lateMs.push(at - answered)
      missing += subscribers - times.length
    }
    const total = subscribers * rounds
    const early = before.reduce((a, b) => a + b, 0)
    const clientSide =
      `${rounds} invalidations on node 0 (answer median ${q(answerMs, 0.5).toFixed(1)} ms, p99 ${q(answerMs, 0.99).toFixed(1)} ms): ` +
        `${early} of ${total} deliveries read before the answer (${((100 * early) / total).toFixed(1)} %), ${lateMs.length} after it ` +
        `(by median ${q(lateMs, 0.5).toFixed(2)} ms, max ${q(lateMs, 1).toFixed(2)} ms), ${missing} never within 5 s`
    // The nodes' side: each write of an event to a stream's socket, against its answer.
    await new Promise((resolve) => setTimeout(resolve, 300)) // the probes flush every 100 ms
    const written = new Map<string, number[]>()
    for (const line of readFileSync(probeFile, 'utf8').split('\n').filter(Boolean)) {
      const [subject, at] = line.split(' ')
      if (!written.has(subject!)) written.set(subject!, [])
      written.get(subject!)!.push(Number(at))
    }
    let writtenBefore = 0
    let writtenAfter = 0
    const leadMs: number[] = []
    for (const [subject, answer] of answeredAt) {
      for (const at of written.get(subject) ?? []) {
        if (at <= answer) writtenBefore++
        else writtenAfter++
        leadMs.push(answer - at)
      }
    }
    const nodesSide =
      `nodes' side: ${writtenBefore} of ${total} writes of the event to a stream's socket came before the answer, ${writtenAfter} after it, ${total - writtenBefore - writtenAfter} never; ` +
        `the answer came a median ${q(leadMs, 0.5).toFixed(2)} ms (min ${q(leadMs, 0).toFixed(2)} ms) after each write`
    return {
      scenario: 'event-fanout',
      title: `event-fanout: ${subscribers} event streams over ${nodeCount} nodes, ${rounds} invalidations`,
      lines: [clientSide, "(what this one process reads later than the answer is only the order in which its event loop takes the loopback sockets)"],
      checks: [{ text: nodesSide, ok: writtenBefore === total }],
      data: { subscribers, nodes: nodeCount, invalidations: rounds, readBeforeAnswer: early, readAfter: lateMs.length, missing, writtenBefore, writtenAfter, answerMs, lateMs, leadMs },
    }
  },
})
