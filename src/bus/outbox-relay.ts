import type { Logger } from 'pino'
import type { Metrics } from '../metrics.js'
import { agentState, apiKeyRevision, companyState, userState, type Change } from '../domain.js'
import type { OutboxEntry, Store } from '../store/store.js'
import type { InvalidationBus } from './bus.js'

/**
 * Republishes changes whose publish was never confirmed: the writer's publish failed (a
 * Redis blip: the write answered 503 although it was committed) or the writer died between
 * its commit and its publish. Every publishing write leaves a change_outbox row in the same
 * statement, and the writer deletes it once the bus confirmed the publish; a row older than
 * `minAgeMs` is therefore one the writer gave up on (or is still slowly publishing: then
 * this publish is a harmless duplicate).
 *
 * For each such row the relay reads the row's CURRENT state from the store and publishes
 * that. Revisions only grow, so publishing the current state is always safe and idempotent;
 * the outbox rows are deleted only once the publish resolved. No lock is held across the
 * publish: several nodes may relay the same row at once, which only duplicates a publish.
 * Errors (database or Redis away) are logged at warn and retried with backoff; they never
 * throw out of the relay.
 */
export interface OutboxRelay {
  start(): void
  /** Stops the schedule; resolves once a round in progress (if any) has ended. */
  stop(): Promise<void>
  /** One round now (tests); resolves to the number of outbox rows republished and deleted. */
  runOnce(): Promise<number>
  /** outbox rows as of the last round that could count them; undefined before that */
  backlog(): number | undefined
}

export interface OutboxRelayOptions {
  store: Store
  bus: InvalidationBus
  logger: Logger
  metrics: Metrics
  /** pause between rounds while all is well (default 1000 ms) */
  intervalMs?: number
  /** rows younger than this belong to a writer still publishing (default 2000 ms) */
  minAgeMs?: number
  /** rows per round (default 500) */
  batchSize?: number
  /** publishes in flight at once (default 16): with a node cut off, each waits out a lease */
  concurrency?: number
  /** longest pause after repeated failures (default 10 000 ms) */
  maxBackoffMs?: number
}

export function createOutboxRelay(options: OutboxRelayOptions): OutboxRelay {
  const { store, bus, metrics } = options
  const intervalMs = options.intervalMs ?? 1000
  const minAgeMs = options.minAgeMs ?? 2000
  const batchSize = options.batchSize ?? 500
  const concurrency = options.concurrency ?? 16
  const maxBackoffMs = options.maxBackoffMs ?? 10_000
  const log = options.logger.child({ component: 'outbox-relay' })

  const countRepublished = metrics.counter('chat_auth_outbox_republished_total', 'Outbox rows whose change the relay republished (the writer had not confirmed it)')
  const countFailures = metrics.counter('chat_auth_outbox_relay_failures_total', 'Outbox relay rounds that failed (database or bus unavailable)')

  let lastBacklog: number | undefined
  let timer: NodeJS.Timeout | undefined
  let running: Promise<unknown> | undefined
  let stopped = true
  let failures = 0

  /** The current state of the row an outbox entry names, as a change; undefined: nothing to publish. */
  async function currentChange(entry: OutboxEntry): Promise<Change | undefined | 'unknown-kind'> {
    switch (entry.kind) {
      case 'user': {
        const user = await store.getUser(entry.key)
        return user && { kind: 'user', state: userState(user) }
      }
      case 'agent': {
        const agent = await store.getAgent(entry.key)
        return agent && { kind: 'agent', state: agentState(agent) }
      }
      case 'apiKey': {
        const key = await store.getApiKeyState(entry.key)
        // Only revocations are published, and a revocation is for good (see states.ts).
        return key && { kind: 'apiKey', keyId: key.keyId, revision: apiKeyRevision(key.revoked) }
      }
      case 'company': {
        const company = await store.getCompanyState(entry.key)
        return company && { kind: 'company', state: companyState(company) }
      }
      case 'token': {
        // Pruned once the token expired: then there is nothing left to refuse.
        const token = await store.getRevokedToken(entry.key)
        return token && { kind: 'token', jti: token.jti, exp: token.exp }
      }
      default:
        return 'unknown-kind'
    }
  }

  async function runOnce(): Promise<number> {
    const { total, due } = await store.outboxBacklog(minAgeMs)
    lastBacklog = total
    if (due === 0) return 0
    const entries = await store.dueOutbox(minAgeMs, batchSize)
    // Many rows for one key (a burst of invalidations of one user) need one publish.
    const groups = new Map<string, { entry: OutboxEntry; ids: string[] }>()
    for (const entry of entries) {
      const group = groups.get(entry.kind + '\u0000' + entry.key)
      if (group) group.ids.push(entry.id)
      else groups.set(entry.kind + '\u0000' + entry.key, { entry, ids: [entry.id] })
    }
    const queue = [...groups.values()]
    let republished = 0
    let failure: unknown
    const worker = async () => {
      for (let group = queue.shift(); group !== undefined && failure === undefined && !stopped; group = queue.shift()) {
        try {
          const change = await currentChange(group.entry)
          if (change === 'unknown-kind') {
            // Written by a newer version of the service; one of its nodes will relay it.
            log.debug({ kind: group.entry.kind }, 'outbox row of an unknown kind left for another node')
            continue
          }
          if (change === undefined) log.warn({ kind: group.entry.kind, key: group.entry.key }, 'outbox row names a row that no longer exists')
          else await bus.publish(change)
          await store.deleteOutbox(group.ids)
          republished += group.ids.length
          countRepublished(undefined, group.ids.length)
        } catch (error) {
          failure ??= error
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(concurrency, queue.length) }, worker))
    if (failure !== undefined) throw failure
    if (republished > 0) {
      log.info({ republished }, 'republished changes whose publish had not been confirmed')
      lastBacklog = Math.max(0, total - republished)
    }
    return republished
  }

  function schedule(delayMs: number): void {
    if (stopped) return
    timer = setTimeout(round, delayMs)
    timer.unref()
  }

  function round(): void {
    timer = undefined
    if (stopped) return
    const current = runOnce().then(
      () => {
        if (failures > 0) log.info({ after: failures }, 'outbox relay recovered')
        failures = 0
        schedule(intervalMs)
      },
      (error: unknown) => {
        if (stopped) return // the stores are being closed under us: not worth a warning
        failures++
        countFailures()
        const backoffMs = Math.min(maxBackoffMs, intervalMs * 2 ** Math.min(failures, 16))
        log.warn({ err: error instanceof Error ? error.message : String(error), failures, retryInMs: backoffMs }, 'outbox relay round failed')
        schedule(backoffMs)
      },
    )
    running = current
    void current.finally(() => {
      if (running === current) running = undefined
    })
  }

  return {
    start() {
      if (!stopped) return
      stopped = false
      schedule(intervalMs)
    },
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      timer = undefined
      await running?.catch(() => {})
    },
    runOnce,
    backlog: () => lastBacklog,
  }
}
