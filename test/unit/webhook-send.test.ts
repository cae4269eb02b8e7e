import t from 'tap'
import type { LookupAddress } from 'node:dns'
import { sendAttempt } from '../../src/webhooks/send.js'
import { destinationPolicy } from '../../src/webhooks/destinations.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'

/**
 * One attempt's destination check (src/webhooks/send.ts): the name is resolved once, every
 * address it resolved to is checked, and the connection goes to the address checked, not
 * to whatever a second resolution would answer (DNS rebinding: public when checked,
 * internal when connected). The resolver is injected here; test/stores/api/admin/webhook-destinations
 * makes the same check through the system's resolver.
 */
const endpoint = (url: string) => ({ url, secret: 'whsec_' + Buffer.alloc(32, 9).toString('base64') })
const delivery = { eventId: '1', payload: '{"id":"1"}' }
const stop = new AbortController().signal

t.test('resolved once; the connection goes to the address that was checked', async (t) => {
  const checked = await startWebhookReceiver({ host: '127.0.0.1' })
  t.teardown(() => checked.close())
  // Linux answers on all of 127.0.0.0/8: the same port on another loopback address.
  const internal = await startWebhookReceiver({ host: '127.0.0.3', port: checked.port })
  t.teardown(() => internal.close())
  const asked: string[] = []
  const resolve = async (host: string): Promise<LookupAddress[]> => {
    asked.push(host)
    return [{ address: asked.length === 1 ? '127.0.0.1' : '127.0.0.3', family: 4 }]
  }
  const destinations = destinationPolicy(['127.0.0.1/32'], { resolve })
  const attempt = await sendAttempt(endpoint(`http://rebind.test:${checked.port}/hook`), delivery, { stop, destinations })
  t.strictSame(attempt, { delivered: true, status: 200, error: null, interrupted: false })
  t.equal(checked.received.length, 1, 'sent to the address checked')
  t.equal(internal.received.length, 0, 'never to the one a second resolution would give')
  t.strictSame(asked, ['rebind.test'], 'resolved once')
  t.equal(checked.received[0]!.headers.host, `rebind.test:${checked.port}`, 'the Host header is still the name')
})

t.test('a name with any refused address is refused before connecting; so is a refused literal', async (t) => {
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const resolve = async (): Promise<LookupAddress[]> => [
    { address: '8.8.8.8', family: 4 },
    { address: '127.0.0.1', family: 4 },
  ]
  const destinations = destinationPolicy(undefined, { resolve })
  t.strictSame(await sendAttempt(endpoint(`http://rebind.test:${receiver.port}/hook`), delivery, { stop, destinations }), {
    delivered: false,
    status: null,
    error: 'destination refused: rebind.test resolves to 127.0.0.1, a loopback address',
    interrupted: false,
  })
  t.strictSame(await sendAttempt(endpoint(receiver.url), delivery, { stop, destinations }), {
    delivered: false,
    status: null,
    error: 'destination refused: 127.0.0.1 is a loopback address',
    interrupted: false,
  })
  t.strictSame(await sendAttempt(endpoint(`http://[::ffff:7f00:1]:${receiver.port}/hook`), delivery, { stop, destinations }), {
    delivered: false,
    status: null,
    error: 'destination refused: ::ffff:7f00:1 is an IPv4-mapped loopback address (127.0.0.1)',
    interrupted: false,
  })
  t.equal(receiver.received.length, 0, 'nothing reached the receiver')
})

t.test('a name that does not resolve: a failed attempt that says so', async (t) => {
  const resolve = async (): Promise<LookupAddress[]> => {
    throw Object.assign(new Error('getaddrinfo ENOTFOUND nowhere.test'), { code: 'ENOTFOUND' })
  }
  const attempt = await sendAttempt(endpoint('http://nowhere.test/hook'), delivery, { stop, destinations: destinationPolicy(undefined, { resolve }) })
  t.strictSame(attempt, { delivered: false, status: null, error: 'could not connect: ENOTFOUND', interrupted: false })
})
