import { performance } from 'node:perf_hooks'
import { call } from '../../support/http-client.js'
import { ADMIN_TOKEN } from '../../support/constants.js'
import { sleep } from '../../support/poll.js'
import { startWebhookReceiver } from '../../support/webhook-receiver.js'

/**
 * What the receiver refuses (500), from which attempt of an event this is and the event's
 * place among the events it has seen (from 1): never at random, so that a run refuses the
 * same share every time. Not every n-th attempt: the sender sends 50 deliveries a turn, in
 * event order, so behind a backlog the event retried first in each turn would land on the
 * same place every turn, be refused every time, and its doubling wait outgrow the run.
 */
export type Refusal = (attemptOfEvent: number, eventOrdinal: number) => boolean

/** The first attempt of every fifth event (the driver's: retries under every fault). */
export const FIRST_OF_EVERY_FIFTH: Refusal = (attemptOfEvent, eventOrdinal) => attemptOfEvent === 1 && eventOrdinal % 5 === 0
/** The first attempt of each event (a probe's: every event needs a retry to arrive). */
export const FIRST_OF_EACH: Refusal = (attemptOfEvent) => attemptOfEvent === 1

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

const admin = (node: string, method: string, path: string, body?: unknown) => call(node, method, path, body, { authorization: `Bearer ${ADMIN_TOKEN}` })

/**
 * A webhook receiver of the company (SPEC §9.3): a real HTTP server (test/support's) that
 * verifies every signature with the `standardwebhooks` package and refuses the attempts
 * `refuse` names (500). `drain(boundMs)` waits until every event the listing has of the
 * company since the endpoint was created was accepted at least once (or `boundMs` passed).
 */
export async function startChaosWebhookReceiver(node: string, companyId: string, refuse: Refusal) {
  const receiver = await startWebhookReceiver()
  const accepted = new Set<string>()
  const attemptsOf = new Map<string, number>()
  const ordinals = new Map<string, number>()
  let failedOnPurpose = 0
  let duplicates = 0
  let badSignatures = 0
  receiver.behave = (attempt) => {
    if (!attempt.verified) {
      badSignatures++
      return 400
    }
    const id = attempt.headers['webhook-id'] ?? attempt.event.id
    const n = (attemptsOf.get(id) ?? 0) + 1
    attemptsOf.set(id, n)
    if (n === 1) ordinals.set(id, ordinals.size + 1)
    if (refuse(n, ordinals.get(id)!)) {
      failedOnPurpose++
      return 500
    }
    if (accepted.has(id)) duplicates++
    accepted.add(id)
    return 204
  }
  const created = await admin(node, 'POST', `/admin/v1/companies/${companyId}/webhooks`, { url: receiver.url })
  if (created.status !== 201) {
    await receiver.close()
    throw new Error(`webhook: ${created.status} ${JSON.stringify(created.body)}`)
  }
  receiver.secret = created.body.secret

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
      while (performance.now() - started < boundMs && ids.some((id) => !accepted.has(id))) {
        await sleep(250)
        ids = (await eventsSinceCreated()) ?? ids
      }
      await receiver.close()
      const attempts = receiver.received.length
      const missingIds = ids.filter((id) => !accepted.has(id))
      log(
        `webhooks: ${ids.length} events of the company, ${ids.length - missingIds.length} accepted by the receiver at least once (all within ${((performance.now() - started) / 1000).toFixed(1)} s, or ${boundMs / 1000} s) over ${attempts} attempts ` +
          `(${failedOnPurpose} refused on purpose, ${duplicates} duplicates of an accepted one, ${badSignatures} bad signatures); never accepted: ${missingIds.length}`,
      )
      // Refused every time it came, or never sent at all: what tells a sender that gave up from one that lost it.
      for (const id of missingIds.slice(0, 3)) log(`  webhooks: event ${id} never accepted; attempts that reached the receiver: ${attemptsOf.get(id) ?? 0}`)
      return { events: ids.length, accepted: ids.length - missingIds.length, attempts, failedOnPurpose, duplicates, missing: missingIds.length + badSignatures, missingIds }
    },
    close: () => receiver.close(),
  }
}
