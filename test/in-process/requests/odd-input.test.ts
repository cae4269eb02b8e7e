/**
 * Issue 10, findings 4, 5 and 7: the odd inputs an attacker tries. Text that is not
 * well-formed UTF-16 is a 400 VALIDATION_ERROR (it used to be stored as U+FFFD, folding
 * different user ids into one user); an id in upper case is the same id on every path, and
 * caches hold only the lower-case form (an upper-case agentId used to leave a cache entry
 * no change ever reached); an overlong admin URL is a
 * 404 that does not echo it; the longest lifetime the config allows still makes a date.
 */
import t from 'tap'
import { ADMIN_TOKEN, createTenant, post, serverErrorCounts, snapshotRows, startApp } from '../../support/helpers.js'

const node = await startApp(t)
const acme = await createTenant(node)
const credentials = { keyId: acme.keyId, keySecret: acme.keySecret }

t.test('lone surrogates are a 400 VALIDATION_ERROR on every text field, and change nothing', async (t) => {
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` }
  const cases: Array<[string, string, Record<string, string>, Record<string, unknown>]> = [
    ['userId, high surrogate', '/rest/v1/auth/token', {}, { ...credentials, userId: 'victim\ud800' }],
    ['userId, low surrogate', '/rest/v1/auth/token', {}, { ...credentials, userId: 'victim\udfff' }],
    ['userId, reversed pair', '/rest/v1/auth/token', {}, { ...credentials, userId: 'victim\udc00\ud800' }],
    ['keyId', '/rest/v1/auth/token', {}, { ...credentials, keyId: acme.keyId + '\ud800', userId: 'u' }],
    ['keySecret', '/rest/v1/auth/token', {}, { ...credentials, keySecret: '\udfff', userId: 'u' }],
    ['customerUserId', '/rest/v1/auth/invalidate-token', {}, { ...credentials, customerUserId: '\ud800' }],
    ['company name', '/admin/v1/companies', admin, { name: 'Acme\ud800' }],
    ['agent name', `/admin/v1/companies/${acme.companyId}/agents`, admin, { name: '\udfffAgent' }],
  ]
  const before = await snapshotRows(node)
  for (const [label, url, headers, payload] of cases) {
    const response = await post(node, url, payload, headers)
    t.equal(response.statusCode, 400, label)
    t.equal(response.json().code, 'VALIDATION_ERROR', label)
    t.equal(response.json().statusCode, 400, label)
  }
  t.equal(await snapshotRows(node), before, 'no row changed')
})

t.test('well-formed text outside the BMP, and U+FFFD itself, are ordinary user ids, each its own user', async (t) => {
  const ids = ['victim\ufffd', 'victim\ud83d\ude00', 'victim']
  const users = new Set<string>()
  for (const userId of ids) {
    const response = await post(node, '/rest/v1/auth/token', { ...credentials, userId })
    t.equal(response.statusCode, 200, JSON.stringify(userId))
    t.equal(response.json().user.externalId, userId, 'the answer names the id that was sent')
    users.add(response.json().user.id)
  }
  t.equal(users.size, ids.length, 'three ids, three users')
})

t.test('an id written in upper case is the same id on every path, and answered in lower case', async (t) => {
  const agent = (await node.admin('POST', `/admin/v1/companies/${acme.companyId}/agents`, { name: 'Original' })).json()
  const upper = agent.id.toUpperCase()
  const first = await post(node, '/rest/v1/auth/token', { ...credentials, userId: 'case-user', agentId: upper })
  t.equal(first.statusCode, 200)
  t.same(first.json().agent, { id: agent.id, name: 'Original', active: true }, 'the agent, under its lower-case id')

  // The finding: the upper-case spelling left a cache entry that deactivating never reached.
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${upper}`, { name: 'Renamed', active: false })).statusCode, 200)
  for (const spelling of [upper, agent.id]) {
    const issued = await post(node, '/rest/v1/auth/token', { ...credentials, userId: 'case-user', agentId: spelling })
    t.equal(issued.statusCode, 200)
    t.same(issued.json().agent, { id: agent.id, name: 'Renamed', active: false }, `the current agent, asked for as ${spelling}`)
  }

  const userId = first.json().user.id as string
  t.equal(userId, userId.toLowerCase(), 'ids are answered in lower case')
  const invalidated = await post(node, '/rest/v1/auth/invalidate-token', { ...credentials, customerUserId: userId.toUpperCase() })
  t.equal(invalidated.statusCode, 200)
  t.equal(invalidated.json().customerUserId, userId)

  for (const [url, id] of [[`/admin/v1/companies/${acme.companyId.toUpperCase()}`, acme.companyId], [`/admin/v1/customer-users/${userId.toUpperCase()}`, userId]] as const) {
    const response = await node.admin('GET', url)
    t.equal(response.statusCode, 200, url)
    t.equal(response.json().id, id, 'answered in lower case')
  }
})

t.test('an overlong admin URL is a 404 that does not echo it', async (t) => {
  const long = 'a'.repeat(5000)
  for (const url of [`/admin/v1/companies/${long}`, `/admin/v1/companies/${long}/api-keys`, `/admin/v1/${long}`, `/${long}`]) {
    for (const authorized of [true, false]) {
      const response = await node.inject({ method: 'GET', url, headers: authorized ? { authorization: `Bearer ${ADMIN_TOKEN}` } : {} })
      const label = `${url.slice(0, 30)}… ${authorized ? 'with' : 'without'} the admin token`
      t.ok([401, 404].includes(response.statusCode), `${label}: ${response.statusCode}`)
      if (authorized) t.equal(response.statusCode, 404, label)
      t.notMatch(response.body, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', `${label}: the URL is not echoed`)
    }
  }
})

t.test('the longest lifetime the config allows still makes a date', async (t) => {
  const longLived = await startApp(t, { TOKEN_MAX_TTL: '36500d' })
  const tenant = await createTenant(longLived, 'Long')
  const issued = await post(longLived, '/rest/v1/auth/token', { keyId: tenant.keyId, keySecret: tenant.keySecret, userId: 'u', expiresIn: '36500d' })
  t.equal(issued.statusCode, 200)
  t.ok(Date.parse(issued.json().expiresAt) > Date.now(), issued.json().expiresAt)
  const tooLong = await post(longLived, '/rest/v1/auth/token', { keyId: tenant.keyId, keySecret: tenant.keySecret, userId: 'u', expiresIn: '100000000d' })
  t.equal(tooLong.statusCode, 400)
  t.equal(tooLong.json().code, 'INVALID_EXPIRES_IN')
  t.same(await serverErrorCounts(longLived), [], 'no 5xx')
  t.same(await serverErrorCounts(node), [], 'no 5xx on the main node either')
})

