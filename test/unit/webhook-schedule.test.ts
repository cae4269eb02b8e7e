import t from 'tap'
import { MAX_RETRY_DELAY_MS, retryDelayMs, RETRY_FOR_MS } from '../../src/webhooks/schedule.js'
import { signatureHeaders, generateWebhookSecret } from '../../src/webhooks/signature.js'
import { Webhook } from 'standardwebhooks'

t.test('backoff: doubling from the base, at most an hour apart', async (t) => {
  t.strictSame([1, 2, 3, 4].map((n) => retryDelayMs(5000, n)), [5000, 10_000, 20_000, 40_000])
  t.equal(retryDelayMs(5000, 10), 5000 * 2 ** 9, '42 min 40 s')
  t.equal(retryDelayMs(5000, 11), MAX_RETRY_DELAY_MS)
  t.equal(retryDelayMs(5000, 10_000), MAX_RETRY_DELAY_MS, 'no overflow however many attempts')
})

t.test('retried for at least 24 h: the rule of recordAttempt (migrations/010_webhooks.sql), played out', async (t) => {
  for (const base of [10, 5000, 3_600_000]) {
    // An attempt at `at` that fails is followed by another unless the delivery is 24 h old.
    let at = 0
    let attempts = 0
    for (;;) {
      attempts++
      if (at >= RETRY_FOR_MS) break
      at += retryDelayMs(base, attempts)
    }
    t.ok(at >= RETRY_FOR_MS, `base ${base} ms: the last attempt at ${(at / 3_600_000).toFixed(2)} h`)
    t.ok(at < RETRY_FOR_MS + MAX_RETRY_DELAY_MS, 'and no later than an hour past 24 h')
    if (base === 5000) t.equal(attempts, 34, 'the default: 34 attempts, the last 24 h 25 min after the event')
  }
})

t.test('signatures: what node:crypto signs, the standardwebhooks package verifies', async (t) => {
  const secret = generateWebhookSecret()
  const body = JSON.stringify({ id: '1', type: 'token.revoked' })
  const headers = signatureHeaders(secret, '1', Math.floor(Date.now() / 1000), body)
  t.strictSame(new Webhook(secret).verify(body, headers), JSON.parse(body))
  t.equal(headers['webhook-signature'], new Webhook(secret).sign('1', new Date(Number(headers['webhook-timestamp']) * 1000), body), 'the same signature as the package makes')
  t.throws(() => new Webhook(generateWebhookSecret()).verify(body, headers), 'another secret fails')
})
