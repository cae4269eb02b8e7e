import { randomBytes } from 'node:crypto'
import net from 'node:net'
import { performance } from 'node:perf_hooks'
import t from 'tap'
import { pino } from 'pino'
import type { RedisSentinelConnection } from '../../../src/config.js'
import { createSentinelWatch } from '../../../src/bus/connection/sentinel-watch.js'
import { deriveBusKeys } from '../../../src/bus/messages/messages.js'
import { StoreUnavailableError } from '../../../src/errors.js'
import { sleep, waitFor } from '../../support/poll.js'
import { busNodes, userChanges, until as untilState, type BusNode } from '../../support/bus-nodes.js'
import { startSentinelSet, type SentinelSet } from '../../support/services.js'

/**
 * The Redis bus in Sentinel mode against real servers: one primary, one replica and three
 * sentinels of this test's own (test/support/services.ts). Failovers as Sentinel does them;
 * nothing is timed, every wait is for a state.
 */
const LEASE_MS = 200

/** Whether nothing listens on the port any more (a killed server). */
const refusesConnections = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' })
    socket.once('connect', () => (socket.destroy(), resolve(false)))
    socket.once('error', () => resolve(true))
  })
const prefix = `chat-auth-sentinel-${randomBytes(4).toString('hex')}`
const logger = pino({ level: 'silent' })
const KEYS = deriveBusKeys([{ alg: 'HS256', secret: 'redis-sentinel-test-secret-of-at-least-32-bytes' }])

let set: SentinelSet

t.before(async () => {
  set = await startSentinelSet()
})
t.teardown(async () => {
  await buses.closeAll()
  await set?.stop()
})

function connection(): RedisSentinelConnection {
  return {
    kind: 'sentinel',
    sentinels: set.sentinelPorts.map((port) => ({ host: '127.0.0.1', port })),
    name: set.name,
    sentinelUsername: undefined,
    sentinelPassword: undefined,
    username: undefined,
    password: undefined,
    tls: false,
  }
}

const buses = busNodes({ leaseMs: LEASE_MS, logger, prefix, keys: KEYS })
const nodes = buses.nodes
type Node = BusNode
const node = (): Node => buses.start({ connection: connection() })
const userChange = userChanges()
const until = untilState(15_000, 10)

/** Is this node's subscriber connection on the data server at `port`? */
const subscribedOn = async (port: number, n: Node): Promise<boolean> => {
  const list = (await (await set.client(port)).client('LIST')) as string
  return list.includes(` name=${prefix}:sub:${n.bus.nodeId} `)
}

const received = (n: Node, id: string) => n.changes.some((c) => JSON.stringify(c).includes(`"${id}"`))

t.test('SENTINEL FAILOVER: nodes leave the old primary while it still serves, flush, and changes flow on the new one', async (t) => {
  const [a, b] = [node(), node()]
  await Promise.all([a.bus.start(), b.bus.start()])
  await until('both nodes to trust their caches', () => a.bus.trusted() && b.bus.trusted())
  const before = await set.primaryPort()
  await a.bus.publish(userChange('before-failover'))
  t.ok(received(b, 'before-failover'), 'a change reaches the other node before the failover')

  const epochs = [a.epochs, b.epochs]
  let trustLapsed = [false, false]
  const watching = setInterval(() => (trustLapsed = [trustLapsed[0] || !a.bus.trusted(), trustLapsed[1] || !b.bus.trusted()]), 2)
  const after = await set.failover()
  t.not(after, before, `the sentinels name ${after} instead of ${before}`)
  await until('both subscribers on the new primary, none left on the old one', async () => {
    const onNew = (await subscribedOn(after, a)) && (await subscribedOn(after, b))
    const onOld = (await subscribedOn(before, a)) || (await subscribedOn(before, b))
    return onNew && !onOld
  })
  // Sentinel demotes the old primary only seconds after the switch: the nodes left it on
  // the sentinels' word, not because it closed their connections.
  t.equal(((await (await set.client(before)).call('ROLE')) as unknown[])[0], 'master', 'the old primary still called itself primary when the nodes had left it')
  await until('both nodes to trust again', () => a.bus.trusted() && b.bus.trusted())
  clearInterval(watching)
  t.same(trustLapsed, [true, true], 'each node stopped trusting its cache during the switch')
  t.ok(a.epochs > epochs[0]! && b.epochs > epochs[1]!, 'each node flushed its caches')
  t.match(await a.metrics.render(), /chat_auth_bus_epoch_changes_total\{reason="primary_changed"\} [1-9]/, 'the flush says why')

  await b.bus.publish(userChange('after-failover'))
  t.ok(received(a, 'after-failover'), 'a change published on the new primary reaches the other node')
})

t.test('primary killed: writes fail while no primary serves and succeed once the new one does', async (t) => {
  const [a, b] = nodes.length >= 2 ? [nodes[0]!, nodes[1]!] : [node(), node()]
  await Promise.all([a.bus.start(), b.bus.start()])
  await until('both nodes to trust their caches', () => a.bus.trusted() && b.bus.trusted())
  // A sentinel refuses a new failover for a while after the last one; the kill waits it out.
  const before = await set.primaryPort()
  const killing = set.killPrimary(60_000)
  // The publish must go out once the primary is gone (a fixed sleep lost that race on a busy machine).
  await waitFor('the primary to be gone', () => refusesConnections(before), { timeoutMs: 10_000, everyMs: 5 })
  const during = await a.bus.publish(userChange('while-down')).then(
    () => 'resolved',
    (error: unknown) => error,
  )
  t.type(during, StoreUnavailableError, 'a publish while no primary answers rejects (the write answers 503; the change log delivers it)')
  const killed = await killing
  t.ok(!a.bus.trusted() || !(await subscribedOn(killed, a).catch(() => false)), 'no node trusts a dead primary')
  await until('both nodes to trust again, on the new primary', () => a.bus.trusted() && b.bus.trusted(), 30_000)
  const primary = await set.primaryPort()
  t.ok((await subscribedOn(primary, a)) && (await subscribedOn(primary, b)), 'both subscribed on the new primary')
  await a.bus.publish(userChange('after-kill'))
  t.ok(received(b, 'after-kill'), 'a change published on the new primary reaches the other node')
})

t.test("a writer's confirmation: only the server a majority of sentinels names now, and since when", async (t) => {
  const started = performance.now()
  let changes = 0
  const watch = createSentinelWatch({
    connection: connection(),
    leaseMs: LEASE_MS,
    queryTimeoutMs: LEASE_MS,
    now: () => performance.now(),
    onPrimaryChanged: () => changes++,
    onError: () => {},
  })
  // As the bus does every tick.
  const ticking = setInterval(() => watch.poll(), LEASE_MS / 4)
  t.teardown(() => (clearInterval(ticking), watch.close()))
  const primary = `127.0.0.1:${await set.primaryPort()}`
  const other = `127.0.0.1:${set.dataPorts.find((port) => `127.0.0.1:${port}` !== primary)}`
  const since = await watch.confirm(primary, performance.now(), 5000)
  t.ok(since !== undefined && since >= started, 'the primary is confirmed, with the moment this view first had the majority')
  t.equal(watch.primaryAddress(), primary, 'the majority names it')
  t.ok(watch.vouchedUntil() > performance.now(), 'and the answers vouch for it for a lease')
  t.equal(changes, 1, 'the first majority counts as a change (the caller flushes)')
  t.equal(await watch.confirm(other, performance.now(), 5000), undefined, 'any other server is refused: a writer whose PUBLISH it ran answers 503')
  t.equal(await watch.confirm(primary, performance.now(), 5000), since, 'the same majority keeps its first moment')
})

t.test("the kit's failover() asks again when Sentinel aborted the failover (a replica that missed failover-timeout)", async (t) => {
  // A set of its own: this one ends with its roles swapped.
  const own = await startSentinelSet('chat-auth-aborted')
  t.teardown(() => own.stop())
  const replica = own.dataPorts.find((port) => port !== own.dataPorts[0])!
  await own.waitForRole(replica, 'slave')
  const pid = Number(/process_id:(\d+)/.exec(await (await own.client(replica)).info('server'))![1])
  // Stopped as the failover starts, it reports its promotion only after Sentinel gave up on it
  // (failover-timeout 2 s): the sentinels keep naming the old primary until asked again.
  process.kill(pid, 'SIGSTOP')
  const resume = () => {
    try {
      process.kill(pid, 'SIGCONT')
    } catch {
      // already gone: the set was stopped
    }
  }
  const resuming = setTimeout(resume, 4000)
  t.teardown(() => {
    clearTimeout(resuming)
    resume()
  })
  t.equal(await own.failover(40_000), replica, 'the replica is the primary')
  t.same(await own.namedPorts(), [replica, replica, replica], 'every sentinel names it')
})
