// The chaos test's mutants: each wraps or replaces one injected part of a node (src/assembly/
// bus.ts `NodeParts`) so that one defence is gone. No switch in src/ turns a defence off, and
// no configuration variable reaches these: only node-host.mjs passes them in.
//
// Each mutant counts the times it acted (`calls`), so that the test can tell it reached the node.
import { createRevocationFilter } from '../../../dist/src/cache/revocation-filter.js'
import { Cohort } from '../../../dist/src/sessions/cohort.js'

/** A change log whose every read claims nothing changed, moving the cursor to now. */
const readsNothing = (changeLog) => ({
  since: async () => ({ ...(await changeLog.since(undefined)), complete: true, changes: [] }),
})

/** Resolves once none of the hub's streams replays a backlog. */
async function untilNoReplay(hub) {
  while (hub.replaying() > 0) await new Promise((resolve) => setTimeout(resolve, 10))
}

/** `config`: the node's own (loadConfig), for a mutant that needs a configured value. */
export function createMutant(name, config) {
  let calls = 0
  const acted = () => void calls++
  let bus
  const keepBus = (wrapped) => (bus = wrapped)
  const mutants = {
    // No flush on a new epoch, and a new subscription trusted without catching up.
    'no-epoch-flush': {
      bus: (inner) =>
        keepBus({
          ...inner,
          start: () => inner.start(),
          onChange: (handler) => inner.onChange(handler),
          onEpochChange: () => acted(),
        }),
      changeLog: (changeLog) => ({ since: (cursor) => (acted(), readsNothing(changeLog).since(cursor)) }),
    },
    // The catch-up after a reconnect reads from where it reconnected, not from its cursor.
    'catch-up-skips-window': {
      changeLog: (changeLog) => ({ since: (cursor) => (cursor === undefined ? changeLog.since(cursor) : (acted(), readsNothing(changeLog).since(cursor))) }),
    },
    // The catch-up leaves out the tokens revoked (revoke-token) while the channel was lost.
    'catch-up-ignores-revoked-tokens': {
      changeLog: (changeLog) => ({
        async since(cursor) {
          const read = await changeLog.since(cursor)
          const changes = read.changes.filter((change) => change.kind !== 'token')
          if (changes.length < read.changes.length) acted()
          return { ...read, changes }
        },
      }),
    },
    // The reads of the change log made while the node trusts its cache (the periodic ones)
    // drop what they read and move the cursor past it; read often, so that one falls between
    // a fault and the node noticing it.
    'subscribed-reads-skip': {
      catchUpEveryMs: 100,
      bus: keepBus,
      changeLog: (changeLog) => ({
        async since(cursor) {
          const trusted = bus?.trusted() === true
          const read = await changeLog.since(cursor)
          if (!trusted) return read
          if (read.changes.length) acted()
          return { ...read, changes: [] }
        },
      }),
    },
    // A filter of revoked jtis being loaded misses the revocations the bus brings meanwhile
    // (cache/revoked-tokens.ts gives them to both filters). Made to show: each filter reports
    // no entries, so every revocation starts a rebuild, and pages of one jti make each
    // rebuild span many queries.
    'rebuild-misses-arrivals': {
      revokedTokens: {
        pageSize: 1,
        rebuildAfterAdds: 0,
        createFilter: (bytes) => {
          const filter = createRevocationFilter(bytes)
          let answering = false
          return {
            add: (jti) => (answering ? filter.add(jti) : acted()),
            addAll: (jtis) => filter.addAll(jtis),
            mightHold: (jti) => ((answering = true), filter.mightHold(jti)),
            entries: 0,
            bytes: filter.bytes,
            falsePositiveRate: () => filter.falsePositiveRate(),
          }
        },
      },
    },
    // (Sentinel) the primary is not checked with the sentinels. Made to show: the nodes read
    // the change log while subscribed every 30 s instead of every second, so that the
    // staleness a split brain leaves lasts the whole window the vouching closes (until
    // Sentinel demotes the old primary) instead of the one second that read would give it:
    // its probe (probes/split-brain.ts) then sees it whatever the timing.
    'no-primary-check': {
      primaryWatch: () => (acted(), undefined),
      catchUpEveryMs: 30_000,
    },
    // Redis Cluster: the master of the bus's slot never checked with a majority of the
    // cluster's nodes. The watch only routes new connections (redis-bus.ts: a Cluster has no
    // other way to find the master): the node trusts its cache on whatever server its
    // subscriber reached, stays on a master the others replaced, and a writer does not confirm
    // the server that took its publish. As with 'no-primary-check', the change log is read
    // every 30 s instead of every second: its probe (probes/cluster-partition.ts) then sees it
    // whatever the timing.
    'no-cluster-watch': {
      primaryWatch: () => (acted(), undefined),
      catchUpEveryMs: 30_000,
    },
    // Redis Cluster: a subscriber that ignores its server dropping the subscription when the
    // bus's slot leaves it (the unrequested SUNSUBSCRIBE, a MOVED, a PING answered "PONG"): it
    // keeps the connection, whose pongs keep its lease, while no message reaches it. The change
    // log is read every 30 s (as above) so that its probe (probes/slot-bounce.ts) sees it.
    'ignores-slot-left': {
      onSlotLeft: () => acted(),
      catchUpEveryMs: 30_000,
    },
    // Revocations kept until exp + JWT_CLOCK_TOLERANCE only, as if every clock agreed with
    // the database's: the write finds nothing to keep once the database's clock passed
    // that, and the prune drops by it too (MAX_CLOCK_SKEW left out of the grace).
    'retention-ignores-skew': {
      store: (store) => {
        const tolerance = config.jwt.clockToleranceSeconds
        return {
          ...store,
          async revokeToken(companyId, jti, exp, userId, limits, actor) {
            const written = await store.revokeToken(companyId, jti, exp, userId, { ...limits, graceSeconds: tolerance }, actor)
            if (written === 'expired') acted()
            return written
          },
          pruneRevokedTokens: (_graceSeconds) => store.pruneRevokedTokens(tolerance),
        }
      },
    },
    // The node acknowledges a change before the sessions it ends are aborted: the pipeline's
    // sessions step (change-pipeline.ts) has its promise dropped (sessions/sessions.ts returns
    // one while it re-reads a row whose sessions are open), so the ack no longer waits for it.
    // Made to show: the reads of those rows take 0.4 lease (within the half lease a correct
    // node may wait before it ends the sessions unread), so that the abort comes after the
    // writer answered rather than racing it; its run gives the nodes a long lease.
    'acks-before-sessions': {
      changeSteps: (steps) => ({
        ...steps,
        sessions: {
          ...steps.sessions,
          onChange(change) {
            const held = steps.sessions.onChange(change)
            if (held === undefined) return undefined
            acted()
            held.catch(() => {})
            return undefined
          },
        },
      }),
      store: (store) => {
        const slow = (read) => async (ids) => (await new Promise((resolve) => setTimeout(resolve, config.leaseMs * 0.4)), read(ids))
        return { ...store, getUsers: slow(store.getUsers), getCompanyStates: slow(store.getCompanyStates), getAgents: slow(store.getAgents) }
      },
    },
    // The pipeline reordered (change-pipeline.ts): the caches step runs last, once the steps
    // the acknowledgement waits for have settled and the acknowledgement is on its way, instead
    // of first. Made to show: it runs 0.4 lease after them, so that a verification right after
    // the writer's 200 still meets the old state in this node's cache; its run gives the nodes
    // a long lease.
    'caches-after-acknowledgement': {
      changeSteps: (steps) => ({
        ...steps,
        caches: {
          ...steps.caches,
          apply(change) {
            acted()
            setTimeout(() => steps.caches.apply(change), config.leaseMs * 0.4)
          },
        },
      }),
    },
    // The node acknowledges a change before its events are written to the open event streams:
    // the hub's promise (stream/hub.ts onChange) is dropped. Made to show: the stream's reads of
    // new events take 0.4 lease (within the half lease, as above); its run gives the nodes a long lease.
    'acks-before-stream-writes': {
      eventHub: (hub) => ({
        ...hub,
        onChange() {
          const held = hub.onChange()
          if (held === undefined) return undefined
          acted()
          held.catch(() => {})
          return undefined
        },
      }),
      store: (store) => ({ ...store, eventsSince: async (...args) => (await new Promise((resolve) => setTimeout(resolve, config.leaseMs * 0.4)), store.eventsSince(...args)) }),
    },
    // The node acknowledges a change only once no event stream is replaying a backlog: the
    // acknowledgement waits for another stream's catch-up again, as the hub did before issue 40
    // (stream/hub.ts replays beside the reads a change waits for). The noisy-neighbour scenario
    // (noisy-neighbour.test.ts) catches it: a company's replays last, and another company's
    // writes wait for them.
    'acks-wait-for-replays': {
      eventHub: (hub) => ({
        ...hub,
        onChange() {
          const held = hub.onChange()
          if (hub.replaying() === 0) return held
          acted()
          return Promise.all([held, untilNoReplay(hub)]).then(() => undefined)
        },
      }),
    },
    // A webhook attempt that failed (the receiver refused it, timed out, or was not there) is
    // recorded as delivered: the event is never sent again.
    'webhook-failures-recorded-delivered': {
      store: (store) => ({
        ...store,
        recordAttempt: (owner, webhookId, deliveryId, outcome, leaseMs) => {
          if (!outcome.delivered) acted()
          return store.recordAttempt(owner, webhookId, deliveryId, outcome.delivered ? outcome : { ...outcome, delivered: true }, leaseMs)
        },
      }),
    },
    // A session that leaves its cohort's list (sessions/cohort.ts) takes the sessions after it
    // along: a company's or agent's change no longer finds them. Not a part the node is built
    // from, so the class itself is changed, in this node's process only (install, below).
    // Each session lost this way is left in a cohort of its own that no index holds, and that
    // still holds it when it closes: otherwise its close would find its old cohort emptied and
    // take that out of the index a second time, which throws and ends the node, and a node
    // that ended leaves no open session for the checker to find.
    'cohort-unlink-loses-the-rest': {
      install() {
        const unlink = Cohort.prototype.unlink
        Cohort.prototype.unlink = function (session) {
          if (session.next === undefined) return unlink.call(this, session)
          acted()
          for (let lost = session.next; lost !== undefined; lost = lost.next) {
            const stranded = Object.create(this)
            stranded.head = lost
            stranded.unlink = () => {}
            lost.cohort = stranded
          }
          if (session.prev === undefined) this.head = undefined
          else session.prev.next = undefined
          session.prev = undefined
          session.next = undefined
        }
      },
    },
    // The writer answers without waiting for the acknowledgements, with a receipt that lists
    // every node the registry holds live as acknowledged (bus/bus.ts `Receipt`): a node
    // reported as acknowledged before it did. The change still goes out behind the answer.
    'receipt-claims-every-node': {
      bus: (inner) => {
        let changes = 0
        return {
          ...inner,
          async publish(change) {
            const startedAt = Date.now()
            inner.publish(change).catch(() => {})
            const live = await inner.board.statuses()
            acted()
            const afterMs = Date.now() - startedAt
            return { changeId: `${inner.nodeId}.early.${++changes}`, outcome: 'acknowledged', nodes: live.map(({ nodeId }) => ({ nodeId, ackedAfterMs: afterMs, sessionsEnded: 0 })) }
          },
        }
      },
    },
    // The receipt lists only the nodes that acknowledged: a node whose lease the writer
    // waited out (live, registered, listed with null) is left out.
    'receipt-leaves-out-unacknowledged': {
      bus: (inner) => ({
        ...inner,
        async publish(change) {
          const receipt = await inner.publish(change)
          const nodes = receipt.nodes.filter((node) => node.ackedAfterMs !== null)
          if (nodes.length < receipt.nodes.length) acted()
          return { ...receipt, nodes }
        },
      }),
    },
  }
  const chosen = mutants[name]
  if (!chosen) throw new Error(`name a mutant: ${Object.keys(mutants).join(', ')}`)
  const { install, ...parts } = chosen
  install?.()
  return { parts, calls: () => calls }
}

export const MUTANTS = ['no-epoch-flush', 'catch-up-skips-window', 'catch-up-ignores-revoked-tokens', 'subscribed-reads-skip', 'rebuild-misses-arrivals', 'no-primary-check', 'retention-ignores-skew', 'acks-before-sessions', 'cohort-unlink-loses-the-rest', 'acks-before-stream-writes', 'webhook-failures-recorded-delivered', 'acks-wait-for-replays', 'caches-after-acknowledgement', 'receipt-claims-every-node', 'receipt-leaves-out-unacknowledged', 'no-cluster-watch', 'ignores-slot-left']
