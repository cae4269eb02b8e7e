import { randomUUID } from 'node:crypto'
import t from 'tap'
import pino from 'pino'
import { createWebhookWorker } from '../../../src/webhooks/worker.js'
import { destinationPolicy } from '../../../src/webhooks/destinations.js'
import { storeWithUser } from '../../support/helpers.js'
import { startWebhookReceiver } from '../../support/webhook-receiver.js'
import { waitFor } from '../../support/poll.js'

/**
 * The sender's nudges (src/webhooks/worker.ts): every change a node learns of nudges its
 * sender, so under a steady stream of writes each nudge used to read the queue once
 * (`claimEndpoints`, a query) whether or not a delivery was waiting. Nudges closer together
 * than the interval now share one read: the first at once, the rest once, at the end of the
 * interval, and nothing queued meanwhile waits for the poll. The queue is the real store's;
 * the poll is set an hour apart, so only nudges read it here.
 */
t.test('nudges within the interval share one read of the queue; none is lost', async (t) => {
  const { store, company, user } = await storeWithUser(t)
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  receiver.secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64')
  await store.createWebhook({ id: randomUUID(), companyId: company.id, url: receiver.url, types: ['tokens.invalidated'], secret: receiver.secret })

  let reads = 0
  let inFlight = 0
  const counted = {
    claimEndpoints: (...args: Parameters<typeof store.claimEndpoints>) => {
      reads++
      inFlight++
      return store.claimEndpoints(...args).finally(() => inFlight--)
    },
    dueDeliveries: store.dueDeliveries.bind(store),
    recordAttempt: store.recordAttempt.bind(store),
    releaseEndpoint: store.releaseEndpoint.bind(store),
  }
  const interval = 1000
  const worker = createWebhookWorker({ store: counted, logger: pino({ level: 'silent' }), retryBaseMs: 1000, pollMs: 3_600_000, nudgeIntervalMs: interval, destinations: destinationPolicy(['127.0.0.0/8']) })
  t.teardown(() => worker.stop())
  t.equal(reads, 1, 'the sender reads the queue once as it starts')
  await waitFor('the first read done', () => inFlight === 0)

  // Ten writes, each nudging once its read would have finished: ten reads before.
  const started = performance.now()
  for (let i = 0; i < 10; i++) {
    await store.incrementTokenVersion(company.id, user.id)
    worker.nudge()
    await waitFor('no read in flight', () => inFlight === 0, { everyMs: 5 })
  }
  const within = performance.now() - started < interval
  if (within) t.equal(reads, 1, 'the ten nudges within the interval read nothing yet')
  await waitFor('all ten deliveries, sent after the one read at the interval’s end', () => receiver.received.length, { until: (n) => n >= 10 })
  t.equal(receiver.received.length, 10, 'each delivered once')
  t.ok(receiver.received.every((r) => r.verified && r.event.type === 'tokens.invalidated'), 'signed, of the webhook’s type')
  await waitFor('no read in flight', () => inFlight === 0)
  // One read at the end of the interval, and one more once its endpoint's turn left room
  // (or one per interval, when a slow machine took longer than one for the ten writes).
  t.ok(reads <= (within ? 3 : 12), `reads of the queue for ten nudges: ${reads}`)
  if (within) t.ok(reads < 10, 'fewer reads than nudges')

  // After a quiet interval, a nudge reads at once again.
  await new Promise((resolve) => setTimeout(resolve, interval))
  const before = reads
  const quietNudge = performance.now()
  worker.nudge()
  t.equal(reads, before + 1, 'a nudge after a quiet interval reads the queue at once')
  await waitFor('that read done', () => inFlight === 0, { everyMs: 5 })
  worker.nudge()
  if (performance.now() - quietNudge < interval) t.equal(reads, before + 1, 'the next, within the interval, waits for its end')
  await waitFor('the read at the end of the interval', () => reads, { until: (n) => n === before + 2 })
})
