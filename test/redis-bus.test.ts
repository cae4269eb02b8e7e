import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { createRedisBus, type RedisBus } from '../src/bus/redis-bus.js'
import type { Change } from '../src/bus/bus.js'
import { encodeCommand, RespDecoder, RespError, type RespValue } from '../src/bus/resp.js'
import { StoreUnavailableError } from '../src/errors.js'
import { Metrics } from '../src/metrics.js'
import { waitFor } from './support/poll.js'
import { startTcpProxy } from './support/tcp-proxy.js'

/**
 * The Redis bus against the real Redis (REDIS_URL, default redis://127.0.0.1:6379), each
 * run on a channel prefix of its own. Latencies are printed, never asserted.
 */
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const LEASE_MS = 200
const prefix = `chat-auth-test-${randomBytes(4).toString('hex')}`
const logger = pino({ level: 'silent' })
const admin = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })

interface Node {
  bus: RedisBus
  metrics: Metrics
  changes: Change[]
  epochs: number
}

const nodes: Node[] = []

function node(url = REDIS_URL, extra: { leaseMs?: number } = {}): Node {
  const metrics = new Metrics()
  const bus = createRedisBus({ url, leaseMs: extra.leaseMs ?? LEASE_MS, logger, metrics, prefix })
  const n: Node = { bus, metrics, changes: [], epochs: 0 }
  bus.onChange((change) => n.changes.push(change))
  bus.onEpochChange(() => n.epochs++)
  nodes.push(n)
  return n
}

let revision = 0
const userChange = (id = 'u1'): Change => ({
  kind: 'user',
  state: { id, companyId: 'c', externalId: 'e', agentId: 'a', tokenVersion: ++revision, active: true, revision },
})

const until = (what: string, predicate: () => boolean, timeoutMs = 5000) => waitFor(what, predicate, { timeoutMs, everyMs: 5 })

const subscriberClientId = async (bus: RedisBus): Promise<string | undefined> => {
  const list = (await admin.client('LIST')) as string
  const line = list.split('\n').find((l) => l.includes(` name=${prefix}:sub:${bus.nodeId} `))
  return line?.match(/\bid=(\d+)/)?.[1]
}

const outcomes = (m: Metrics) => {
  const text = m.render()
  const count = (outcome: string) => Number(text.match(new RegExp(`chat_auth_bus_publishes_total\\{outcome="${outcome}"\\} (\\d+)`))?.[1] ?? 0)
  return { acked: count('acked'), leaseExpired: count('lease_expired'), failed: count('failed') }
}

t.before(async () => {
  await admin.connect()
})

t.teardown(async () => {
  await Promise.allSettled(nodes.map((n) => n.bus.close()))
  const keys = await admin.keys(`${prefix}:*`)
  if (keys.length) await admin.del(...keys)
  admin.disconnect()
})

t.test('RESP decoder: any chunking of a reply stream decodes to the same replies', async (t) => {
  const replies: RespValue[] = [
    ['subscribe', 'chan', 1],
    ['message', 'chan', 'x'.repeat(300) + 'é'],
    ['pong', ''],
    'OK',
    new RespError('ERR no'),
    null,
    42,
  ]
  const encode = (value: RespValue): string => {
    if (value === null) return '$-1\r\n'
    if (value instanceof RespError) return `-${value.message}\r\n`
    if (typeof value === 'number') return `:${value}\r\n`
    if (typeof value === 'string') return value === 'OK' ? '+OK\r\n' : `$${Buffer.byteLength(value)}\r\n${value}\r\n`
    return `*${value.length}\r\n` + value.map(encode).join('')
  }
  const stream = Buffer.from(replies.map(encode).join(''))
  const plain = (values: RespValue[]) => JSON.stringify(values.map((r) => (r instanceof RespError ? `error:${r.message}` : r)))
  fc.assert(
    fc.property(fc.array(fc.nat(stream.length), { maxLength: 12 }), (cuts) => {
      const points = [...new Set([0, ...cuts, stream.length])].sort((a, b) => a - b)
      const decoder = new RespDecoder()
      const out: RespValue[] = []
      for (let i = 1; i < points.length; i++) decoder.push(stream.subarray(points[i - 1], points[i]), (r) => out.push(r))
      return plain(out) === plain(replies)
    }),
    { numRuns: 300 },
  )
  t.pass('decoded the same under 300 chunkings')
  t.equal(encodeCommand(['PING']).toString(), '*1\r\n$4\r\nPING\r\n')
})

t.test('three nodes: publish resolves once every other node has applied the change', async (t) => {
  const [a, b, c] = [node(), node(), node()]
  t.equal(a.bus.trusted(), false, 'not trusted before start')
  await Promise.all([a.bus.start(), b.bus.start(), c.bus.start()])
  t.ok(a.bus.trusted() && b.bus.trusted() && c.bus.trusted(), 'trusted once subscribed, registered and leased')
  t.ok(a.epochs >= 1, 'the confirmed subscription started an epoch')
  t.same(a.bus.health(), { ready: true, trusted: true, epoch: a.bus.health().epoch })

  const latencies: number[] = []
  for (let i = 0; i < 200; i++) {
    const change = userChange(`u${i % 7}`)
    const started = performance.now()
    await a.bus.publish(change)
    latencies.push(performance.now() - started)
    for (const other of [a, b, c]) {
      if (other.changes.at(-1) !== change && JSON.stringify(other.changes.at(-1)) !== JSON.stringify(change)) {
        t.fail(`node did not apply change ${i} before publish resolved`)
        return
      }
    }
  }
  latencies.sort((x, y) => x - y)
  const q = (p: number) => latencies[Math.ceil(p * latencies.length) - 1]!.toFixed(2)
  t.comment(`publish latency over 200 changes, 3 nodes: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms`)
  const o = outcomes(a.metrics)
  t.equal(o.acked, 200, 'every publish was acknowledged by every registered node')
  t.match(a.metrics.render(), /chat_auth_bus_ack_latency_seconds\{quantile="0.99"\}/)
  t.match(a.metrics.render(), /chat_auth_bus_subscribed 1/)

  // agents and API keys travel too
  await b.bus.publish({ kind: 'agent', state: { id: 'ag', companyId: 'c', name: 'n', active: false, revision: 1 } })
  await b.bus.publish({ kind: 'apiKey', keyId: 'ak_1', revision: 1 })
  t.same(c.changes.slice(-2).map((ch) => ch.kind), ['agent', 'apiKey'])
  t.same(a.changes.slice(-2).map((ch) => ch.kind), ['agent', 'apiKey'])

  // a node that leaves cleanly is no longer waited for
  await c.bus.close()
  t.equal(c.bus.trusted(), false)
  await a.bus.publish(userChange())
  t.equal(outcomes(a.metrics).acked, 201, 'a closed node leaves the registry')
  await b.bus.close()
  await a.bus.close()
})

t.test('CLIENT KILL of the subscriber: new epoch, no trust until re-subscribed and leased', async (t) => {
  const [a, b] = [node(), node()]
  await Promise.all([a.bus.start(), b.bus.start()])
  const epochsBefore = b.epochs
  const id = await subscriberClientId(b.bus)
  t.ok(id, 'the subscriber connection is named')
  await admin.client('KILL', 'ID', id!)
  await until('the loss to be noticed', () => b.epochs > epochsBefore)
  t.equal(b.bus.trusted(), false, 'not trusted while re-subscribing')
  await until('trust to come back', () => b.bus.trusted())
  t.ok(b.epochs >= epochsBefore + 2, 'flushed on the loss and again on the confirmed re-subscribe')
  // and it is fully back: a publish is acknowledged again
  const o = outcomes(a.metrics)
  await a.bus.publish(userChange())
  t.equal(outcomes(a.metrics).acked, o.acked + 1)
  await Promise.all([a.bus.close(), b.bus.close()])
})

t.test('a half-open subscriber: the writer waits out its lease, and by then it trusts nothing', async (t) => {
  const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379))
  t.teardown(() => proxy.close())
  const a = node()
  const b = node(`redis://127.0.0.1:${proxy.port}`)
  await Promise.all([a.bus.start(), b.bus.start()])
  t.ok(b.bus.trusted())
  const epochsBefore = b.epochs
  t.equal(await proxy.blackhole(':sub:'), 1, 'the subscriber connection goes silent')

  const change = userChange('cut-off')
  const started = performance.now()
  await a.bus.publish(change)
  const took = performance.now() - started
  t.equal(b.bus.trusted(), false, 'when publish resolves, the cut-off node no longer trusts its cache')
  t.notOk(b.changes.includes(change), 'and it never saw the change')
  t.equal(outcomes(a.metrics).leaseExpired, 1)
  t.comment(`publish with one node cut off took ${took.toFixed(1)} ms (lease ${LEASE_MS} ms)`)

  await until('the cut-off node to give up on its connection and come back', () => b.epochs > epochsBefore + 1 && b.bus.trusted())
  t.pass('reconnected through a fresh connection, flushed, trusted again')
  await Promise.all([a.bus.close(), b.bus.close()])
})

t.test('Redis unreachable: publish rejects (503), start does not hang, trust never comes', async (t) => {
  const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379))
  await proxy.refuse()
  t.teardown(() => proxy.close())
  const a = node(`redis://127.0.0.1:${proxy.port}`, { leaseMs: 100 })
  await a.bus.start()
  t.equal(a.bus.trusted(), false)
  t.equal(a.bus.health().ready, false)
  const applied: Change[] = a.changes
  const change = userChange()
  await t.rejects(a.bus.publish(change), StoreUnavailableError)
  t.ok(applied.includes(change), 'applied locally all the same: it is committed')
  t.equal(outcomes(a.metrics).failed, 1)

  await proxy.accept()
  await until('recovery once Redis is reachable', () => a.bus.trusted())
  await a.bus.publish(userChange())
  t.pass('publishes again')
  await a.bus.close()
})

t.test('a malformed message on the channel flushes the caches; padding is ignored', async (t) => {
  const a = node()
  await a.bus.start()
  const epochsBefore = a.epochs
  await admin.publish(`${prefix}:changes`, JSON.stringify({ t: 'pad', p: 'x'.repeat(100) }))
  await admin.publish(`${prefix}:changes`, '{"t":"c","c":{"kind":"user"}}')
  await until('the malformed message to flush', () => a.epochs > epochsBefore)
  t.equal(a.epochs, epochsBefore + 1, 'one flush, for the malformed message only')
  t.ok(a.bus.trusted(), 'the channel itself is fine')
  await a.bus.close()
})
