import type { Shape } from '../scenario.js'
import { startChaosWebhookReceiver } from '../webhook-receiver.js'
import { company, invalidate, tally, users, type Log, type ProbeResult } from './probe.js'

/**
 * A webhook attempt that failed (mutant `webhook-failures-recorded-delivered`): a delivery
 * is due again after a failed attempt until one succeeds (webhooks/worker.ts,
 * store/webhooks.ts), so that a receiver that refused still gets every event at least once.
 *
 * The company's receiver (a real HTTP server checking every signature) refuses the first
 * attempt of every event with 500 and accepts the next. A few users are invalidated; the
 * probe then waits until the receiver has accepted every event the company's listing holds
 * since the endpoint was made, or DRAIN_MS passed (retries start 200 ms after a failure).
 *
 * Why the mutant is caught every time: it records each failed attempt as delivered, and here
 * every event's first attempt fails — by rule, not by chance — so no event is ever sent
 * again: every one is missing when the drain ends. A worker that retries delivers them all
 * within a few doublings of 200 ms.
 */
const EVENTS = 4
const DRAIN_MS = 20_000

export async function webhookRetries(s: Shape, log: Log): Promise<ProbeResult> {
  const p = tally('webhook-retries', log)
  const node = s.nodes[0]!.url
  const { companyId, creds } = await company(s, 'Webhook Co')
  const receiver = await startChaosWebhookReceiver(node, companyId, 'first-of-each')
  try {
    const members = await users(s, creds, 'webhook-user', EVENTS)
    const answers = await Promise.all(members.map((member, i) => invalidate(s.nodes[i % s.nodes.length]!.url, creds, member.userId)))
    log(`  webhook-retries: ${answers.filter((a) => a.status === 200).length} of ${EVENTS} invalidations answered 200`)
    const counts = await receiver.drain(DRAIN_MS, log)
    p.checked(counts.events)
    for (const id of counts.missingIds) p.violation('webhook', `event ${id} never accepted by the receiver within ${DRAIN_MS} ms (its first attempt was refused)`)
    if (counts.missing > counts.missingIds.length) p.violation('webhook', `${counts.missing - counts.missingIds.length} attempt(s) with a bad signature`, counts.missing - counts.missingIds.length)
  } finally {
    await receiver.close()
  }
  return p.result()
}
