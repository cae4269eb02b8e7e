/**
 * Webhook destinations (SPEC §9.3): by default only public unicast addresses. Every other
 * address, however the URL spells it (numeric, hex, octal and short IPv4, IPv4-mapped IPv6),
 * and the names that can only mean a private network, are refused at creation with a 400
 * that says why; a name that resolves to such an address is refused too. At send time the
 * check is made again on the address connected to: a name that resolves to loopback by the
 * time of the attempt (DNS rebinding) gets nothing sent, and the deliveries listing says why
 * instead of what the address answered (which made the sender a port scanner of the
 * node's network). WEBHOOK_ALLOW_PRIVATE_NETWORKS lets an operator allow ranges, or all.
 */
import t from 'tap'
import { createTenant, errorBody, invalidate, issueToken, randomUUID, snapshotRows, startApp } from '../../../support/helpers.js'
import { startWebhookReceiver } from '../../../support/webhook-receiver.js'
import { waitFor } from '../../../support/poll.js'

const strict = await startApp(t)
const HINT = ' (WEBHOOK_ALLOW_PRIVATE_NETWORKS allows private networks)'
const refused = (why: string) => errorBody(400, `url must be a public address: ${why}${HINT}`, 'VALIDATION_ERROR')

const REFUSED: Array<[string, string]> = [
  ['http://127.0.0.1/hook', '127.0.0.1 is a loopback address'],
  ['http://127.0.0.1:3000/hook', '127.0.0.1 is a loopback address'],
  ['http://localhost/hook', 'localhost is a loopback name'],
  ['http://LOCALHOST:8080/', 'localhost is a loopback name'],
  ['http://localhost./hook', 'localhost. is a loopback name'],
  ['http://hooks.localhost/', 'hooks.localhost is a loopback name'],
  ['http://[::ffff:127.0.0.1]/hook', '::ffff:7f00:1 is an IPv4-mapped loopback address (127.0.0.1)'],
  ['http://[::ffff:a9fe:a9fe]/', '::ffff:a9fe:a9fe is an IPv4-mapped link-local address (169.254.169.254)'],
  ['http://2130706433/hook', '127.0.0.1 is a loopback address'],
  ['http://0x7f000001/hook', '127.0.0.1 is a loopback address'],
  ['http://0177.0.0.1/hook', '127.0.0.1 is a loopback address'],
  ['http://127.1/hook', '127.0.0.1 is a loopback address'],
  ['http://0/hook', '0.0.0.0 is an unspecified address'],
  ['http://[::]/hook', ':: is an unspecified address'],
  ['http://[::1]/hook', '::1 is a loopback address'],
  ['http://169.254.169.254/latest/meta-data/', '169.254.169.254 is a link-local address'],
  ['http://10.0.0.1/', '10.0.0.1 is a private address'],
  ['http://10.255.255.254/', '10.255.255.254 is a private address'],
  ['http://192.168.1.1/', '192.168.1.1 is a private address'],
  ['http://172.16.0.1/', '172.16.0.1 is a private address'],
  ['http://172.31.255.254/', '172.31.255.254 is a private address'],
  ['http://[fd00::1]/', 'fd00::1 is a unique-local address'],
  ['http://[fdff:ffff::1]/', 'fdff:ffff::1 is a unique-local address'],
  ['http://[fe80::1]/', 'fe80::1 is a link-local address'],
  ['http://[febf::1]/', 'febf::1 is a link-local address'],
  ['http://100.100.100.200/', '100.100.100.200 is a carrier-grade NAT address'],
  ['http://224.0.0.1/', '224.0.0.1 is a multicast address'],
  ['http://[ff02::1]/', 'ff02::1 is a multicast address'],
  ['http://255.255.255.255/', '255.255.255.255 is a broadcast address'],
  ['http://[64:ff9b::7f00:1]/', '64:ff9b::7f00:1 is a special-purpose address'],
  ['http://[2002:7f00:1::]/', '2002:7f00:1:: is a special-purpose address'],
  ['http://metadata.google.internal/computeMetadata/v1/', 'metadata.google.internal is a private-network name'],
  ['http://printer.local/', 'printer.local is a private-network name'],
  ['http://router.home.arpa/', 'router.home.arpa is a private-network name'],
  ['http://intranet/hook', 'intranet is a private-network name'],
]

t.test('every address that is not public unicast, however spelled, and private names: 400 at creation, saying why', async (t) => {
  const acme = await createTenant(strict, 'Acme')
  const before = await snapshotRows(strict)
  for (const [url, why] of REFUSED) {
    const answer = await strict.admin('POST', `/admin/v1/companies/${acme.companyId}/webhooks`, { url })
    t.equal(answer.statusCode, 400, url)
    t.strictSame(answer.json(), refused(why), url)
  }
  t.equal(await snapshotRows(strict), before, 'nothing created')
})

t.test('public addresses and names that do not resolve to a private address are accepted', async (t) => {
  const acme = await createTenant(strict, 'Acme')
  for (const url of ['https://hooks.example.com/chat', 'http://93.184.215.14/hook', 'https://[2606:4700:4700::1111]/hook', 'http://8.8.8.8:8080/', 'https://172.32.0.1/', 'https://100.128.0.1/']) {
    const answer = await strict.admin('POST', `/admin/v1/companies/${acme.companyId}/webhooks`, { url })
    t.equal(answer.statusCode, 201, url)
  }
})

t.test('send time: a stored URL whose host is, or now resolves to, loopback gets nothing sent; the listing says why', async (t) => {
  const acme = await createTenant(strict, 'Acme')
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  // Stored directly, as if each had passed the check at creation: a name that resolved to a
  // public address then and to 127.0.0.1 now (DNS rebinding), and a node whose operator
  // has since withdrawn WEBHOOK_ALLOW_PRIVATE_NETWORKS.
  const store = strict.gateway.store
  const byName = (await store.createWebhook({ id: randomUUID(), companyId: acme.companyId, url: `http://localhost:${receiver.port}/hook`, types: ['tokens.invalidated'], secret: 'whsec_' + Buffer.alloc(32, 2).toString('base64') }))!
  const byAddress = (await store.createWebhook({ id: randomUUID(), companyId: acme.companyId, url: receiver.url, types: ['tokens.invalidated'], secret: 'whsec_' + Buffer.alloc(32, 3).toString('base64') }))!
  const { user } = await issueToken(strict, acme, 'alice')
  t.equal((await invalidate(strict, acme, user.id)).statusCode, 200)

  const listing = (id: string) => strict.admin('GET', `/admin/v1/webhooks/${id}/deliveries`).then((r) => r.json() as Array<{ status: string; attempt: number; responseStatus: number | null; error: string | null }>)
  const [named] = await waitFor('the attempt by name', () => listing(byName.id), { until: (list) => (list[0]?.attempt ?? 0) >= 1 })
  t.match(named, { status: 'retrying', responseStatus: null })
  t.match(named!.error, /^destination refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address$/)
  const [literal] = await waitFor('the attempt by address', () => listing(byAddress.id), { until: (list) => (list[0]?.attempt ?? 0) >= 1 })
  t.match(literal, { status: 'retrying', responseStatus: null, error: 'destination refused: 127.0.0.1 is a loopback address' })
  t.equal(receiver.received.length, 0, 'the receiver on loopback never got a request')
})

t.test('WEBHOOK_ALLOW_PRIVATE_NETWORKS: the ranges it names are allowed, and only those; true allows every address', async (t) => {
  const ranges = await startApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: '127.0.0.0/8, fd00::/8' })
  const acme = await createTenant(ranges, 'Acme')
  const create = (url: string) => ranges.admin('POST', `/admin/v1/companies/${acme.companyId}/webhooks`, { url })
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  for (const url of ['http://127.0.0.1/', 'http://2130706433/', 'http://[::ffff:127.0.0.1]/', 'http://[fd00::1]/', `http://localhost:${receiver.port}/hook`]) {
    t.equal((await create(url)).statusCode, 201, `${url}: in an allowed range`)
  }
  t.strictSame((await create('http://10.0.0.1/')).json(), refused('10.0.0.1 is a private address'), 'another private range: still refused')
  t.strictSame((await create('http://[::1]/')).json(), refused('::1 is a loopback address'))
  t.equal((await create('http://metadata.google.internal/')).statusCode, 201, 'with ranges allowed, a private name is judged by what it resolves to (here nothing yet; the send checks again)')

  // A name is resolved at creation: localhost is 127.0.0.1, outside 10.0.0.0/8.
  const other = await startApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: '10.0.0.0/8' })
  const beta = await createTenant(other, 'Beta')
  const byName = await other.admin('POST', `/admin/v1/companies/${beta.companyId}/webhooks`, { url: 'http://localhost/hook' })
  t.equal(byName.statusCode, 400)
  t.match(byName.json(), { statusCode: 400, code: 'VALIDATION_ERROR', message: /^url must be a public address: localhost resolves to (127\.0\.0\.1|::1), a loopback address \(WEBHOOK_ALLOW_PRIVATE_NETWORKS allows private networks\)$/ })

  const all = await startApp(t, { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
  const gamma = await createTenant(all, 'Gamma')
  for (const [url] of REFUSED) t.equal((await all.admin('POST', `/admin/v1/companies/${gamma.companyId}/webhooks`, { url })).statusCode, 201, `${url}: allowed`)
})
