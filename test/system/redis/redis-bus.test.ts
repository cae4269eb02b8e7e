import { randomBytes } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import type { RedisBus } from '../../../src/bus/redis-bus.js'
import { rowChanged, type RowChanged } from '../../../src/domain.js'
import { createMessageCodec, deriveBusKeys, type BusKey } from '../../../src/bus/messages/messages.js'
import { StoreUnavailableError } from '../../../src/errors.js'
import { Metrics } from '../../../src/metrics.js'
import { busNodes, userChanges, until as untilState, type BusNode } from '../../support/bus-nodes.js'
import { startTcpProxy } from '../../support/tcp-proxy.js'

/**
 * The Redis bus against the real Redis (REDIS_URL, default redis://127.0.0.1:6379), each
 * run on a channel prefix of its own. Latencies are printed, never asserted.
 */
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const LEASE_MS = 200
const prefix = `chat-auth-test-${randomBytes(4).toString('hex')}`
const logger = pino({ level: 'silent' })
const admin = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })

const KEYS = deriveBusKeys([{ alg: 'HS256', secret: 'redis-bus-test-secret-of-at-least-32-bytes' }])
const OTHER_KEYS = deriveBusKeys([{ alg: 'HS256', secret: 'another-deployment-secret-of-32-bytes-or-more' }])

const buses = busNodes({ url: REDIS_URL, leaseMs: LEASE_MS, logger, prefix, keys: KEYS })
const nodes = buses.nodes
type Node = BusNode

function node(url = REDIS_URL, extra: { leaseMs?: number; keys?: BusKey[] } = {}): Node {
  return buses.start({ url, ...(extra.leaseMs === undefined ? {} : { leaseMs: extra.leaseMs }), ...(extra.keys === undefined ? {} : { keys: extra.keys }) })
}

const userChange = userChanges()
const until = untilState(5000, 5)

const subscriberClientId = async (bus: RedisBus): Promise<string | undefined> => {
  const list = (await admin.client('LIST')) as string
  const line = list.split('\n').find((l) => l.includes(` name=${prefix}:sub:${bus.nodeId} `))
  return line?.match(/\bid=(\d+)/)?.[1]
}

const outcomes = async (m: Metrics) => {
  const text = await m.render()
  const count = (outcome: string) => Number(text.match(new RegExp(`chat_auth_bus_publishes_total\\{outcome="${outcome}"\\} (\\d+)`))?.[1] ?? 0)
  return { acked: count('acked'), leaseExpired: count('lease_expired'), failed: count('failed') }
}

t.before(async () => {
  await admin.connect()
})

t.teardown(async () => {
  await buses.closeAll()
  const keys = await admin.keys(`${prefix}:*`)
  if (keys.length) await admin.del(...keys)
  admin.disconnect()
})

t.test('three nodes: publish resolves once every other node has applied the change', async (t) => {
  const [a, b, c] = [node(), node(), node()]
  t.equal(a.bus.trusted(), false, 'not trusted before start')
  await Promise.all([a.bus.start(), b.bus.start(), c.bus.start()])
  t.ok(a.bus.trusted() && b.bus.trusted() && c.bus.trusted(), 'trusted once subscribed, registered and leased')
  t.ok(a.epochs >= 1, 'the confirmed subscription started an epoch')
  t.match(a.bus.health(), { ready: true, trusted: true, epoch: a.bus.health().epoch, redis: { subscribed: true } })

  const latencies: number[] = []
  for (let i = 0; i < 200; i++) {
    const change = userChange(`u${i % 7}`)
    const started = performance.now()
    await a.bus.publish(change)
    latencies.push(performance.now() - started)
    if (a.changes.at(-1) !== change) {
      t.fail(`the writer did not apply change ${i} at once`)
      return
    }
    for (const other of [b, c]) {
      // Other nodes learn only which row changed, and at which revision.
      if (JSON.stringify(other.changes.at(-1)) !== JSON.stringify(rowChanged(change))) {
        t.fail(`node did not apply change ${i} before publish resolved`)
        return
      }
    }
  }
  latencies.sort((x, y) => x - y)
  const q = (p: number) => latencies[Math.ceil(p * latencies.length) - 1]!.toFixed(2)
  t.comment(`publish latency over 200 changes, 3 nodes: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms`)
  const o = await outcomes(a.metrics)
  t.equal(o.acked, 200, 'every publish was acknowledged by every registered node')
  t.match(await a.metrics.render(), /chat_auth_bus_ack_latency_seconds_bucket\{le="0.005"\} \d+/, 'the ack latency is a histogram')
  t.match(await a.metrics.render(), /chat_auth_bus_subscribed 1/)

  // agents and API keys travel too
  await b.bus.publish({ kind: 'agent', state: { id: 'ag', companyId: 'c', name: 'n', active: false, tokensGeneration: 0, revision: 1 } })
  await b.bus.publish({ kind: 'apiKey', keyId: 'ak_1', revision: 1 })
  t.same(c.changes.slice(-2).map((ch) => ch.kind), ['agent', 'apiKey'])
  t.same(a.changes.slice(-2).map((ch) => ch.kind), ['agent', 'apiKey'])

  // a node that leaves cleanly is no longer waited for
  await c.bus.close()
  t.equal(c.bus.trusted(), false)
  await a.bus.publish(userChange())
  t.equal((await outcomes(a.metrics)).acked, 201, 'a closed node leaves the registry')
  await b.bus.close()
  await a.bus.close()
})

t.test("a handler's promise holds the acknowledgement (and the writer's own publish) until it settles", async (t) => {
  const [a, b] = [node(), node()]
  await Promise.all([a.bus.start(), b.bus.start()])
  // What a node must finish before its writer may answer (ending sessions): b takes 100 ms,
  // within its lease (200 ms). Past the lease the writer no longer waits for b's answer.
  let bDone = 0
  b.bus.onChange(() => new Promise<void>((resolve) => setTimeout(() => ((bDone = performance.now()), resolve()), 100)))
  const started = performance.now()
  await a.bus.publish(userChange('held-by-b'))
  const answered = performance.now()
  t.ok(bDone > 0 && bDone <= answered, `the writer's publish resolved after b's handler settled (${(answered - started).toFixed(0)} ms)`)
  t.equal((await outcomes(a.metrics)).acked, 1, 'acknowledged, not waited out')

  // The writer's own handler holds its publish the same way.
  let aDone = 0
  a.bus.onChange((change) => ('state' in change ? new Promise<void>((resolve) => setTimeout(() => ((aDone = performance.now()), resolve()), 150)) : undefined))
  await a.bus.publish(userChange('held-by-a'))
  t.ok(aDone > 0 && aDone <= performance.now(), "the writer's own handler settled before its publish resolved")

  // A handler that fails: no acknowledgement, the writer waits out b's lease, and b starts a new epoch.
  const epochs = b.epochs
  b.bus.onChange(() => Promise.reject(new Error('could not end the sessions')))
  await a.bus.publish(userChange('failed-on-b'))
  t.equal((await outcomes(a.metrics)).leaseExpired, 1, "a change b could not apply was never acknowledged: the writer waited out b's lease")
  t.ok(b.epochs > epochs, 'b flushed: it cannot vouch for what it failed to apply')
  await Promise.all([a.bus.close(), b.bus.close()])
})

t.test('the receipt: every node registered when the change went out, when each acknowledged, what each ended; null for one that did not', async (t) => {
  const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379))
  t.teardown(() => proxy.close())
  const [a, b] = [node(), node()]
  const c = node(`redis://127.0.0.1:${proxy.port}`)
  await Promise.all([a.bus.start(), b.bus.start(), c.bus.start()])
  // b ends two sessions of every change, 30 ms after it arrives; the writer a ends one.
  b.bus.onChange(() => new Promise((resolve) => setTimeout(() => resolve({ sessionsEnded: 2 }), 30)))
  a.bus.onChange(() => ({ sessionsEnded: 1 }))
  const started = performance.now()
  const receipt = await a.bus.publish(userChange('with-receipt'))
  const took = performance.now() - started
  t.equal(receipt.outcome, 'acknowledged')
  t.match(receipt.changeId, new RegExp(`^${a.bus.nodeId}\\.\\d+$`))
  t.same(receipt.nodes.map((n) => n.nodeId).sort(), [a.bus.nodeId, b.bus.nodeId, c.bus.nodeId].sort(), 'exactly the nodes registered')
  const line = (bus: RedisBus) => receipt.nodes.find((n) => n.nodeId === bus.nodeId)!
  t.equal(line(a.bus).sessionsEnded, 1, "the writer's own sessions")
  t.equal(line(b.bus).sessionsEnded, 2, "b's, from its acknowledgement")
  t.equal(line(c.bus).sessionsEnded, 0)
  t.ok(line(b.bus).ackedAfterMs! >= 30 && line(b.bus).ackedAfterMs! <= took + 1, `b acknowledged after its handler (${line(b.bus).ackedAfterMs} ms of ${took.toFixed(0)} ms)`)

  // c cut off: the writer waits out its lease, and the receipt says c did not acknowledge.
  t.equal(await proxy.blackhole(':sub:'), 1)
  const cutOff = await a.bus.publish(userChange('c-cut-off'))
  t.equal(cutOff.outcome, 'lease_expired')
  t.same(cutOff.nodes.find((n) => n.nodeId === c.bus.nodeId), { nodeId: c.bus.nodeId, ackedAfterMs: null, sessionsEnded: null })
  t.equal(cutOff.nodes.find((n) => n.nodeId === b.bus.nodeId)?.sessionsEnded, 2, 'the others as before')
  await Promise.all([a.bus.close(), b.bus.close(), c.bus.close()])
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
  const o = await outcomes(a.metrics)
  await a.bus.publish(userChange())
  t.equal((await outcomes(a.metrics)).acked, o.acked + 1)
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
  t.equal((await outcomes(a.metrics)).leaseExpired, 1)
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
  const applied = a.changes
  const change = userChange()
  await t.rejects(a.bus.publish(change), StoreUnavailableError)
  t.ok(applied.includes(change), 'applied locally all the same: it is committed')
  t.equal((await outcomes(a.metrics)).failed, 1)

  await proxy.accept()
  await until('recovery once Redis is reachable', () => a.bus.trusted())
  await a.bus.publish(userChange())
  t.pass('publishes again')
  await a.bus.close()
})

t.test('ioredis, as the subscriber relies on it (checked against the library, not assumed)', async (t) => {
  const options = { lazyConnect: true, retryStrategy: () => null, autoResubscribe: false, enableOfflineQueue: false, autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0 }
  const sub = new Redis(REDIS_URL, { ...options, connectionName: `${prefix}:claims` })
  t.teardown(() => sub.disconnect())
  await sub.connect()
  const channel = `${prefix}:claims`
  const received: string[] = []
  sub.on('message', (from: string, payload: string) => {
    if (from === channel) received.push(payload)
  })
  await sub.subscribe(channel, `${channel}:2`)
  t.equal(await admin.publish(`${channel}:2`, 'x'), 1, 'subscribe() resolved only once every channel was confirmed')
  for (let i = 0; i < 500; i++) await admin.publish(channel, String(i))
  await sub.ping()
  t.equal(received.length, 500, 'PING is allowed in subscriber mode, and its reply settles after every earlier message was handled')
  t.same(received.slice(0, 3), ['0', '1', '2'], 'in arrival order')

  const list = (await admin.client('LIST')) as string
  const id = list.split('\n').find((l) => l.includes(` name=${prefix}:claims `))?.match(/\bid=(\d+)/)?.[1]
  await admin.client('KILL', 'ID', id!)
  await until('the connection to end', () => sub.status === 'end')
  await new Promise((r) => setTimeout(r, 100))
  t.equal(sub.status, 'end', 'retryStrategy () => null: a lost connection is never reopened or resubscribed')
  await t.rejects(sub.ping(), /closed/i, 'and nothing is queued on it for a next one')
})

t.test('messages: authenticated, bound to every field, and rotation-friendly', async (t) => {
  const codec = createMessageCodec(prefix, KEYS)
  const row: RowChanged = { kind: 'user', id: 'u1', revision: 7 }
  const payload = codec.change({ id: 'n1.1', from: 'n1', row })
  t.same(codec.readChange(payload), { ok: true, message: { id: 'n1.1', from: 'n1', row } })
  const wire = JSON.parse(payload)
  for (const [field, value] of [['id', 'n1.2'], ['from', 'n2'], ['kind', 'agent'], ['row', 'u2'], ['rev', 8]] as const) {
    t.same(codec.readChange(JSON.stringify({ ...wire, [field]: value })), { ok: false, reason: 'bad_mac' }, `changing ${field} breaks the MAC`)
  }
  t.same(codec.readChange(JSON.stringify({ ...wire, extra: 1 })), { ok: false, reason: 'malformed' })
  t.same(codec.readChange('{'), { ok: false, reason: 'malformed' })
  t.same(createMessageCodec(prefix, OTHER_KEYS).readChange(payload), { ok: false, reason: 'unknown_key' }, 'another deployment')
  t.same(createMessageCodec(`${prefix}-other`, KEYS).readChange(payload), { ok: false, reason: 'bad_mac' }, 'another prefix')
  const ack = codec.ack({ id: 'n1.1', node: 'n2' })
  t.same(codec.readAck(ack), { ok: true, message: { id: 'n1.1', node: 'n2' } })
  t.same(codec.readAck(JSON.stringify({ ...JSON.parse(ack), node: 'n3' })), { ok: false, reason: 'bad_mac' }, 'an ack is bound to its node')
  t.same(codec.readAck(JSON.stringify({ ...JSON.parse(ack), id: 'n1.2' })), { ok: false, reason: 'bad_mac' }, 'and to its message')
  t.equal(codec.readChange(ack).ok, false, 'an ack is no change')
  // Mid-rotation: a node with [new, old] and one with [old] still understand each other.
  const rotated = createMessageCodec(prefix, [...OTHER_KEYS, ...KEYS])
  t.ok(rotated.readChange(payload).ok, 'new+old reads old')
  t.ok(codec.readChange(rotated.change({ id: 'n3.1', from: 'n3', row })).ok, 'old reads new+old')
})

t.test('a message that fails authentication changes nothing, is counted, and is never acknowledged', async (t) => {
  const [a, b] = [node(), node()]
  await Promise.all([a.bus.start(), b.bus.start()])
  const changesBefore = a.changes.length
  const epochsBefore = a.epochs
  const forged = createMessageCodec(prefix, OTHER_KEYS).change({ id: 'evil.1', from: b.bus.nodeId, row: { kind: 'user', id: 'u1', revision: 1e12 } })
  await admin.publish(`${prefix}:changes`, forged)
  await admin.publish(`${prefix}:changes`, '{"t":"c","c":{"kind":"user"}}')
  await until('both to be rejected', async () => /chat_auth_bus_rejected_messages_total\{kind="change",reason="malformed"\} 1/.test(await a.metrics.render()))
  t.match(await a.metrics.render(), /chat_auth_bus_rejected_messages_total\{kind="change",reason="unknown_key"\} 1/)
  t.equal(a.changes.length, changesBefore, 'nothing was applied')
  t.equal(a.epochs, epochsBefore + 2, 'the caches were flushed: a message we cannot read may be a change of a node whose keys we lack')
  // trusted again without a new connection (on a loaded machine a lease may lapse meanwhile)
  await until('the channel to vouch for the caches again', () => a.bus.trusted())
  t.ok(a.bus.trusted(), 'the channel itself is fine')
  await Promise.all([a.bus.close(), b.bus.close()])
})

t.test('forged acknowledgements never make a writer skip a node that did not apply the change', async (t) => {
  const proxy = await startTcpProxy(Number(new URL(REDIS_URL).port || 6379))
  t.teardown(() => proxy.close())
  const a = node()
  const b = node(`redis://127.0.0.1:${proxy.port}`)
  await Promise.all([a.bus.start(), b.bus.start()])
  // The attacker (not subscribed: Redis would count it as a receiver) guesses the message
  // ids and acks them in b's name: in the old format, under other keys, with a bad MAC.
  const attacker = new Redis(REDIS_URL)
  t.teardown(() => attacker.disconnect())
  const forger = createMessageCodec(prefix, OTHER_KEYS)
  const genuineShape = JSON.parse(createMessageCodec(prefix, KEYS).ack({ id: 'x', node: b.bus.nodeId }))
  await proxy.blackhole(':sub:')
  const change = userChange('forged-ack')
  let publishing = true
  const forging = (async () => {
    while (publishing) {
      for (let k = 1; k <= 3; k++) {
        const id = `${a.bus.nodeId}.${k}`
        await attacker.publish(`${prefix}:ack:${a.bus.nodeId}`, `${id} ${b.bus.nodeId}`)
        await attacker.publish(`${prefix}:ack:${a.bus.nodeId}`, forger.ack({ id, node: b.bus.nodeId }))
        await attacker.publish(`${prefix}:ack:${a.bus.nodeId}`, JSON.stringify({ ...genuineShape, id }))
      }
    }
  })()
  await a.bus.publish(change)
  publishing = false
  await forging
  t.equal(b.bus.trusted(), false, 'when publish resolves, the node that never saw the change no longer trusts its cache')
  t.notOk(b.changes.some((c) => 'id' in c && c.id === 'forged-ack'))
  const o = await outcomes(a.metrics)
  t.equal(o.acked, 0, 'no forged ack counted as an acknowledgement')
  t.match(await a.metrics.render(), /chat_auth_bus_rejected_messages_total\{kind="ack",reason="(malformed|unknown_key|bad_mac)"\} [1-9]/)
  await Promise.all([a.bus.close(), b.bus.close()])
})

t.test('a node removed from the registry on Redis (ZREM) is still waited for', async (t) => {
  const [a, b] = [node(), node()]
  await Promise.all([a.bus.start(), b.bus.start()])
  await a.bus.publish(userChange())
  t.equal((await outcomes(a.metrics)).acked, 1)
  // b renews its entry every lease/4: if a renewal lands between the ZREM and the publish,
  // b is registered again and acknowledges, which proves nothing here; remove it again.
  for (let attempt = 1; ; attempt++) {
    const before = await outcomes(a.metrics)
    await admin.zrem(`${prefix}:nodes`, b.bus.nodeId)
    const started = performance.now()
    await a.bus.publish(userChange())
    const took = performance.now() - started
    const after = await outcomes(a.metrics)
    if (after.acked > before.acked && attempt < 20) continue
    t.equal(after.acked, before.acked, 'not resolved on acks alone: Redis counted a receiver outside the registry')
    t.match(await a.metrics.render(), /chat_auth_bus_publishes_total\{outcome="unknown_receivers"\} 1/)
    t.ok(took >= LEASE_MS, `so it waited out the lease (${took.toFixed(0)} ms)`)
    break
  }
  await until('b to notice its entry was removed', async () => /chat_auth_bus_errors_total\{operation="registration_lost"\} [1-9]/.test(await b.metrics.render()))
  t.pass('and b counts (and logs) the removal when it renews its entry')
  await Promise.all([a.bus.close(), b.bus.close()])
})

t.test('a node whose keys differ (a deployment mid-way through a bad rotation) is never left trusting a stale cache', async (t) => {
  const [a, c] = [node(), node(REDIS_URL, { keys: OTHER_KEYS })]
  await Promise.all([a.bus.start(), c.bus.start()])
  const epochsBefore = c.epochs
  await a.bus.publish(userChange('rotation'))
  t.equal((await outcomes(a.metrics)).leaseExpired, 1, 'c could not acknowledge: the writer waited out its lease')
  t.ok(c.epochs > epochsBefore, 'and c, unable to read the change, flushed its caches')
  t.notOk(c.changes.some((ch) => 'id' in ch && ch.id === 'rotation'))
  await Promise.all([a.bus.close(), c.bus.close()])
})
