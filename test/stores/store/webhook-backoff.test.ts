import { randomUUID } from 'node:crypto'
import t from 'tap'
import pino from 'pino'
import { createWebhookWorker } from '../../../src/webhooks/worker.js'
import { destinationPolicy } from '../../../src/webhooks/destinations.js'
import { storeWithUser } from '../../support/helpers.js'
import { startWebhookReceiver } from '../../support/webhook-receiver.js'
import { sleep, waitFor } from '../../support/poll.js'

/**
 * SPEC §9.3: an endpoint that keeps timing out is backed off as a whole (src/webhooks/worker.ts).
 * Before, a timed-out delivery was put off, but the endpoint's next due delivery was sent at
 * once, and the next: an endpoint that never answers held a sending slot for one timeout per
 * queued event. Here three events wait for an endpoint that never answers; the attempt
 * times out in 300 ms and the endpoint is paused for the retry wait (a minute): in the
 * second and a half that follows, the receiver sees that one attempt and no other.
 */
t.test('an endpoint that times out is paused: its other due deliveries are not tried one after another', async (t) => {
  const { store, company, user } = await storeWithUser(t)
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  receiver.behave = () => 'hang'
  const hook = (await store.createWebhook({ id: randomUUID(), companyId: company.id, url: receiver.url, types: ['tokens.invalidated'], secret: 'whsec_' + Buffer.alloc(32, 1).toString('base64') }))!
  for (let i = 0; i < 3; i++) await store.incrementTokenVersion(company.id, user.id)

  const worker = createWebhookWorker({
    store,
    logger: pino({ level: 'silent' }),
    retryBaseMs: 60_000,
    timeoutMs: 300,
    pollMs: 100,
    destinations: destinationPolicy(['127.0.0.0/8']),
  })
  t.teardown(() => worker.stop())
  await waitFor('the first attempt', () => receiver.received.length >= 1)
  await waitFor('its timeout recorded', () => store.listDeliveries(hook.id, 10), { until: (list) => list.some((d) => d.attempts === 1) })
  await sleep(1500)
  t.equal(receiver.received.length, 1, `one attempt in 1.5 s after a timeout, not one per queued event (${receiver.received.length})`)
  const listing = await store.listDeliveries(hook.id, 10)
  t.strictSame(
    listing.map((d) => [d.attempts, d.lastError]),
    [
      [0, null],
      [0, null],
      [1, 'no answer within 0.3 s'],
    ],
    'the oldest event tried once and timed out; the two after it wait with the endpoint',
  )
})
