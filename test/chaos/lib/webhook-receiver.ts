import { fork } from 'node:child_process'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { call } from '../../support/http-client.js'
import { ADMIN_TOKEN } from '../../support/constants.js'
import { sleep } from '../../support/poll.js'

/**
 * What the receiver refuses (500), from which attempt of an event this is and the event's
 * place among the events it has seen: never at random, so that a run refuses the same share
 * every time. Not every n-th attempt: the sender sends 50 deliveries a turn, in event order,
 * so behind a backlog the event retried first in each turn would land on the same place every
 * turn, be refused every time, and its doubling wait outgrow the run.
 * - `first-of-every-fifth`: the first attempt of every fifth event (the driver's: retries under every fault);
 * - `first-of-each`: the first attempt of each event (a probe's: every event needs a retry to arrive).
 */
export type Refusal = 'first-of-every-fifth' | 'first-of-each'

export interface WebhookCounts {
  events: number
  accepted: number
  attempts: number
  failedOnPurpose: number
  duplicates: number
  /** events never accepted, plus attempts whose signature did not verify */
  missing: number
  missingIds: string[]
}

interface ReceiverCounts {
  attempts: number
  failedOnPurpose: number
  duplicates: number
  badSignatures: number
  accepted: string[]
  attemptsOf: Record<string, number>
}

const SCRIPT = fileURLToPath(new URL('./webhook-receiver-process.mjs', import.meta.url))
const admin = (node: string, method: string, path: string, body?: unknown) => call(node, method, path, body, { authorization: `Bearer ${ADMIN_TOKEN}` })

/**
 * A webhook receiver of the company (SPEC §9.3): a real HTTP server, in a process of its own
 * (webhook-receiver-process.mjs), that verifies every signature with the `standardwebhooks`
 * package and refuses the attempts `refuse` names (500). `drain(boundMs)` waits until every
 * event the listing has of the company since the endpoint was created was accepted at least
 * once (or `boundMs` passed).
 */
export async function startChaosWebhookReceiver(node: string, companyId: string, refuse: Refusal) {
  const child = fork(SCRIPT, [refuse], { execArgv: [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = new Map<number, (result: any) => void>()
  let nextId = 0
  const port = await new Promise<number>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`webhook receiver exited with ${code}`)))
    child.on('message', (message: { ready?: number; id?: number; result?: unknown }) => {
      if (message.ready !== undefined) resolve(message.ready)
      else waiting.get(message.id!)?.(message.result)
    })
  })
  const op = <T>(name: string, fields: Record<string, unknown> = {}) =>
    new Promise<T>((resolve) => {
      const id = nextId++
      waiting.set(id, (result) => {
        waiting.delete(id)
        resolve(result)
      })
      child.send({ id, op: name, ...fields })
    })
  const close = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    child.kill('SIGTERM')
    await exited
  }
  const created = await admin(node, 'POST', `/admin/v1/companies/${companyId}/webhooks`, { url: `http://127.0.0.1:${port}/hook` })
  if (created.status !== 201) {
    await close()
    throw new Error(`webhook: ${created.status} ${JSON.stringify(created.body)}`)
  }
  await op('secret', { secret: created.body.secret })

  const eventIds = async (): Promise<string[] | undefined> => {
    const ids: string[] = []
    let before: string | null = null
    do {
      const page: { status: number; body: any } | undefined = await admin(node, 'GET', `/admin/v1/companies/${companyId}/events?limit=500${before ? `&before=${encodeURIComponent(before)}` : ''}`).catch(() => undefined)
      if (page?.status !== 200) return undefined
      ids.push(...(page.body.events as Array<{ id: string }>).map((event) => event.id))
      before = page.body.next
    } while (before)
    return ids
  }

  // Events committed before the endpoint existed are not its to receive (api_key.created).
  const earlier = new Set((await eventIds()) ?? [])
  const eventsSinceCreated = async () => (await eventIds())?.filter((id) => !earlier.has(id))

  return {
    async drain(boundMs: number, log: (line: string) => void): Promise<WebhookCounts> {
      const started = performance.now()
      let ids = (await eventsSinceCreated()) ?? []
      let counts = await op<ReceiverCounts>('counts')
      let accepted = new Set(counts.accepted)
      while (performance.now() - started < boundMs && ids.some((id) => !accepted.has(id))) {
        await sleep(250)
        ids = (await eventsSinceCreated()) ?? ids
        counts = await op<ReceiverCounts>('counts')
        accepted = new Set(counts.accepted)
      }
      await close()
      const missingIds = ids.filter((id) => !accepted.has(id))
      log(
        `webhooks: ${ids.length} events of the company, ${ids.length - missingIds.length} accepted by the receiver at least once (all within ${((performance.now() - started) / 1000).toFixed(1)} s, or ${boundMs / 1000} s) over ${counts.attempts} attempts ` +
          `(${counts.failedOnPurpose} refused on purpose, ${counts.duplicates} duplicates of an accepted one, ${counts.badSignatures} bad signatures); never accepted: ${missingIds.length}`,
      )
      // Refused every time it came, or never sent at all: what tells a sender that gave up from one that lost it.
      for (const id of missingIds.slice(0, 3)) log(`  webhooks: event ${id} never accepted; attempts that reached the receiver: ${counts.attemptsOf[id] ?? 0}`)
      return { events: ids.length, accepted: ids.length - missingIds.length, attempts: counts.attempts, failedOnPurpose: counts.failedOnPurpose, duplicates: counts.duplicates, missing: missingIds.length + counts.badSignatures, missingIds }
    },
    close,
  }
}
