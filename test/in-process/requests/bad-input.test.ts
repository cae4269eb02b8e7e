/**
 * SPEC §6 bad input, on every POST and PATCH route: malformed JSON, wrong content types,
 * bodies over the limit, wrong types (no coercion), empty and oversized strings, unknown
 * fields; each a 4xx with the SPEC error body, never a 500, never a changed row.
 */
import t, { type Test } from 'tap'
import type { InjectOptions, LightMyRequestResponse } from 'fastify'
import {
  ADMIN_TOKEN,
  countUsers,
  createTenant,
  errorBody,
  issueToken,
  leakedLogLines,
  post,
  serverErrorCounts,
  snapshotRows,
  startApp,
  verify,
  type Tenant,
} from '../../support/helpers.js'

const BODY_LIMIT = 16 * 1024
const INVALID_JSON = errorBody(400, 'Request body is not valid JSON', 'INVALID_JSON')
const EMPTY_JSON = errorBody(400, 'Request body is empty but content-type is application/json', 'INVALID_JSON')
const UNSUPPORTED = errorBody(415, 'Content-Type must be application/json', 'UNSUPPORTED_MEDIA_TYPE')
const TOO_LARGE = errorBody(413, 'Request body is too large', 'PAYLOAD_TOO_LARGE')

const node = await startApp(t)
const acme: Tenant = await createTenant(node, 'Acme')
const issued = await issueToken(node, acme, 'existing-user')
const ADMIN = { authorization: `Bearer ${ADMIN_TOKEN}` }

interface Route {
  label: string
  method: 'POST' | 'PATCH'
  url: string
  headers: Record<string, string>
  /** a body the route accepts */
  valid: Record<string, unknown>
  status: number
  /** [field the message names, body] pairs that must be refused with 400 VALIDATION_ERROR */
  invalid: Array<[string, unknown]>
}

const long = (n: number) => 'x'.repeat(n)
const token = { keyId: acme.keyId, keySecret: acme.keySecret }

const routes: Route[] = [
  {
    label: 'POST /rest/v1/auth/token',
    method: 'POST',
    url: '/rest/v1/auth/token',
    headers: {},
    valid: { ...token, userId: 'existing-user' },
    status: 200,
    invalid: [
      ['keyId', { keySecret: acme.keySecret, userId: 'u' }],
      ['keySecret', { keyId: acme.keyId, userId: 'u' }],
      ['userId', { ...token }],
      ['keyId', { ...token, keyId: 123, userId: 'u' }],
      ['keyId', { ...token, keyId: true, userId: 'u' }],
      ['keyId', { ...token, keyId: null, userId: 'u' }],
      ['keyId', { ...token, keyId: '', userId: 'u' }],
      ['keyId', { ...token, keyId: long(129), userId: 'u' }],
      ['keyId', { ...token, keyId: [acme.keyId], userId: 'u' }],
      ['keySecret', { ...token, keySecret: 1, userId: 'u' }],
      ['keySecret', { ...token, keySecret: '', userId: 'u' }],
      ['keySecret', { ...token, keySecret: long(257), userId: 'u' }],
      ['userId', { ...token, userId: 123 }],
      ['userId', { ...token, userId: 0 }],
      ['userId', { ...token, userId: true }],
      ['userId', { ...token, userId: null }],
      ['userId', { ...token, userId: '' }],
      ['userId', { ...token, userId: long(256) }],
      ['userId', { ...token, userId: '😀'.repeat(256) }],
      ['userId', { ...token, userId: { id: 'u' } }],
      ['userId', { ...token, userId: ['u'] }],
      ['agentId', { ...token, userId: 'u', agentId: 1 }],
      ['agentId', { ...token, userId: 'u', agentId: null }],
      ['agentId', { ...token, userId: 'u', agentId: '' }],
      ['agentId', { ...token, userId: 'u', agentId: long(65) }],
      ['expiresIn', { ...token, userId: 'u', expiresIn: 3600 }],
      ['expiresIn', { ...token, userId: 'u', expiresIn: null }],
      ['expiresIn', { ...token, userId: 'u', expiresIn: '' }],
      ['expiresIn', { ...token, userId: 'u', expiresIn: long(33) }],
    ],
  },
  {
    label: 'POST /rest/v1/auth/invalidate-token',
    method: 'POST',
    url: '/rest/v1/auth/invalidate-token',
    headers: {},
    valid: { ...token, customerUserId: issued.user.id },
    status: 200,
    invalid: [
      ['customerUserId', { ...token }],
      ['customerUserId', { ...token, customerUserId: 123 }],
      ['customerUserId', { ...token, customerUserId: null }],
      ['customerUserId', { ...token, customerUserId: '' }],
      ['customerUserId', { ...token, customerUserId: long(65) }],
      ['customerUserId', { ...token, customerUserId: [issued.user.id] }],
      ['keyId', { ...token, keyId: 7, customerUserId: issued.user.id }],
      ['keySecret', { ...token, keySecret: false, customerUserId: issued.user.id }],
      ['keySecret', { keyId: acme.keyId, customerUserId: issued.user.id }],
    ],
  },
  {
    label: 'POST /admin/v1/companies',
    method: 'POST',
    url: '/admin/v1/companies',
    headers: ADMIN,
    valid: { name: 'Valid company' },
    status: 201,
    invalid: [
      ['name', {}],
      ['name', { name: '' }],
      ['name', { name: long(201) }],
      ['name', { name: 1 }],
      ['name', { name: null }],
      ['name', { name: ['Acme'] }],
    ],
  },
  {
    label: 'PATCH /admin/v1/companies/:companyId',
    method: 'PATCH',
    url: `/admin/v1/companies/${acme.companyId}`,
    headers: ADMIN,
    valid: { name: 'Acme' },
    status: 200,
    invalid: [
      ['name', { name: '' }],
      ['name', { name: null }],
      ['name', { name: 42 }],
      ['name', { name: long(201) }],
      ['defaultAgentId', { defaultAgentId: null }],
      ['defaultAgentId', { defaultAgentId: '' }],
      ['defaultAgentId', { defaultAgentId: 1 }],
      ['defaultAgentId', { defaultAgentId: long(65) }],
    ],
  },
  {
    label: 'POST /admin/v1/companies/:companyId/agents',
    method: 'POST',
    url: `/admin/v1/companies/${acme.companyId}/agents`,
    headers: ADMIN,
    valid: { name: 'Valid agent' },
    status: 201,
    invalid: [
      ['name', {}],
      ['name', { name: '' }],
      ['name', { name: long(201) }],
      ['name', { name: 5 }],
      ['active', { name: 'a', active: 'true' }],
      ['active', { name: 'a', active: 1 }],
      ['active', { name: 'a', active: null }],
    ],
  },
  {
    label: 'PATCH /admin/v1/agents/:agentId',
    method: 'PATCH',
    url: `/admin/v1/agents/${acme.agentId}`,
    headers: ADMIN,
    valid: { name: acme.agentName },
    status: 200,
    invalid: [
      ['name', { name: '' }],
      ['name', { name: null }],
      ['name', { name: long(201) }],
      ['active', { active: 'false' }],
      ['active', { active: 0 }],
      ['active', { active: null }],
      ['active', { active: [] }],
    ],
  },
  {
    label: 'POST /admin/v1/companies/:companyId/api-keys',
    method: 'POST',
    url: `/admin/v1/companies/${acme.companyId}/api-keys`,
    headers: ADMIN,
    valid: { name: 'Valid key' },
    status: 201,
    invalid: [
      ['name', { name: '' }],
      ['name', { name: 1 }],
      ['name', { name: null }],
      ['name', { name: long(201) }],
    ],
  },
  {
    label: 'PATCH /admin/v1/customer-users/:customerUserId',
    method: 'PATCH',
    url: `/admin/v1/customer-users/${issued.user.id}`,
    headers: ADMIN,
    valid: { active: true },
    status: 200,
    invalid: [
      ['active', {}],
      ['active', { active: 'false' }],
      ['active', { active: 'true' }],
      ['active', { active: 0 }],
      ['active', { active: null }],
      ['active', { active: [false] }],
    ],
  },
]

/** A body for a test's name: short, and without the key secret. */
function describe(body: unknown): string {
  const text = JSON.stringify(body, (key, value: unknown) => (key === 'keySecret' && value === acme.keySecret ? 'sk_…' : key === 'keyId' && value === acme.keyId ? 'ak_…' : value))
  return text.length > 70 ? `${text.slice(0, 70)}…` : text
}

function send(route: Route, options: { payload?: string; contentType?: string | null } = {}): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = { ...route.headers }
  if (options.contentType !== null) headers['content-type'] = options.contentType ?? 'application/json'
  const request: InjectOptions = { method: route.method, url: route.url, headers }
  if (options.payload !== undefined) request.payload = options.payload
  return node.inject(request)
}

/** Sends a request that must be refused, and checks the answer and that no row changed. */
async function refused(t: Test, label: string, request: () => Promise<LightMyRequestResponse>, expected: ReturnType<typeof errorBody> | { statusCode: 400; code: 'VALIDATION_ERROR'; field: string }) {
  const before = await snapshotRows(node)
  const response = await request()
  if ('field' in expected) {
    t.equal(response.statusCode, 400, label)
    const body = response.json()
    t.strictSame(Object.keys(body), ['statusCode', 'message', 'code'], `${label}: the error body`)
    t.equal(body.statusCode, 400, label)
    t.equal(body.code, 'VALIDATION_ERROR', label)
    t.match(body.message, expected.field, `${label}: the message names ${expected.field}`)
  } else {
    t.equal(response.statusCode, expected.statusCode, label)
    t.strictSame(response.json(), expected, label)
  }
  t.equal(await snapshotRows(node), before, `${label}: no row changed`)
}

for (const route of routes) {
  t.test(route.label, async (t) => {
    const valid = JSON.stringify(route.valid)

    t.test('malformed JSON is a 400 INVALID_JSON', async (t) => {
      for (const payload of ['{', '{"name":', "{'name':'x'}", '{"name":"x",}', `${valid}}`, `${valid} x`, 'undefined', 'NaN', '{name: "x"}', '\u0000']) {
        await refused(t, JSON.stringify(payload), () => send(route, { payload }), INVALID_JSON)
      }
      await refused(t, 'an empty body', () => send(route, { payload: '' }), EMPTY_JSON)
    })

    t.test('a body that is not a JSON object is a 400 VALIDATION_ERROR', async (t) => {
      for (const payload of ['[]', `[${valid}]`, 'null', '42', '"text"', 'true']) {
        await refused(t, describe(JSON.parse(payload)), () => send(route, { payload }), { statusCode: 400, code: 'VALIDATION_ERROR', field: 'body' })
      }
    })

    t.test('a content type other than JSON is a 415', async (t) => {
      for (const contentType of ['text/plain', 'text/plain; charset=utf-8', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x', 'application/vnd.api+json', 'application/jsonx']) {
        await refused(t, contentType, () => send(route, { payload: valid, contentType }), UNSUPPORTED)
      }
      await refused(t, 'no content type with a body', () => send(route, { payload: valid, contentType: null }), UNSUPPORTED)
    })

    t.test(`a body over ${BODY_LIMIT} bytes is a 413`, async (t) => {
      const padded = JSON.stringify({ ...route.valid, padding: long(BODY_LIMIT) })
      await refused(t, 'valid JSON', () => send(route, { payload: padded }), TOO_LARGE)
      await refused(t, 'malformed JSON', () => send(route, { payload: `{${long(BODY_LIMIT + 10)}` }), TOO_LARGE)
      await refused(t, 'text/plain', () => send(route, { payload: long(BODY_LIMIT + 1), contentType: 'text/plain' }), UNSUPPORTED)
    })

    t.test('wrong types, missing fields, empty and oversized strings are a 400 VALIDATION_ERROR naming the field', async (t) => {
      for (const [field, body] of route.invalid) {
        await refused(t, `${field}: ${describe(body)}`, () => send(route, { payload: JSON.stringify(body) }), { statusCode: 400, code: 'VALIDATION_ERROR', field })
      }
    })

    t.test('unknown fields are ignored, and a JSON content type with parameters is fine', async (t) => {
      const response = await send(route, { payload: JSON.stringify({ ...route.valid, unknownField: 'x', nested: { a: [1, 2] }, id: '00000000-0000-0000-0000-000000000000' }) })
      t.equal(response.statusCode, route.status, response.body)
      t.equal(response.json().id === '00000000-0000-0000-0000-000000000000', false, 'an id in the body is not used')
      const withCharset = await send(route, { payload: valid, contentType: 'application/json; charset=utf-8' })
      t.equal(withCharset.statusCode, route.status, withCharset.body)
    })
  })
}

t.test('a body of exactly the limit is accepted, one byte more is a 413', async (t) => {
  const base = JSON.stringify({ ...token, userId: 'limit-user', padding: '' })
  const exact = JSON.stringify({ ...token, userId: 'limit-user', padding: long(BODY_LIMIT - base.length) })
  t.equal(Buffer.byteLength(exact), BODY_LIMIT)
  const accepted = await post(node, '/rest/v1/auth/token', exact, { 'content-type': 'application/json' })
  t.equal(accepted.statusCode, 200, `${BODY_LIMIT} bytes`)
  const over = JSON.stringify({ ...token, userId: 'limit-user-2', padding: long(BODY_LIMIT - base.length + 1) })
  const users = await countUsers(node, acme.companyId)
  const refusedResponse = await post(node, '/rest/v1/auth/token', over, { 'content-type': 'application/json' })
  t.equal(refusedResponse.statusCode, 413, `${BODY_LIMIT + 1} bytes`)
  t.strictSame(refusedResponse.json(), TOO_LARGE)
  t.equal(await countUsers(node, acme.companyId), users, 'no user was created')
})

t.test('userId: 255 characters (code points) are accepted, and unicode round-trips', async (t) => {
  for (const userId of [long(255), '😀'.repeat(255), 'שלום-مرحبا', '\u202Eevil\u202C', 'a\u200Bb', 'ÅÅ'.normalize('NFD')]) {
    const response = await post(node, '/rest/v1/auth/token', { ...token, userId })
    t.equal(response.statusCode, 200, JSON.stringify(userId).slice(0, 30))
    const body = response.json()
    t.equal(body.user.externalId, userId, 'the token answer')
    t.equal((await node.admin('GET', `/admin/v1/customer-users/${body.user.id}`)).json().externalId, userId, 'the admin answer')
    const verified = await verify(node, body.token)
    t.equal(verified.json().user.externalId, userId, 'the verify body')
    t.equal(decodeURIComponent(verified.headers['x-auth-external-id'] as string), userId, 'the verify header, percent-decoded')
  }
  const nfc = await post(node, '/rest/v1/auth/token', { ...token, userId: 'ÅÅ'.normalize('NFC') })
  const nfd = await post(node, '/rest/v1/auth/token', { ...token, userId: 'ÅÅ'.normalize('NFD') })
  t.not(nfc.json().user.id, nfd.json().user.id, 'ids are compared byte for byte, not normalised')
})

t.test('a NUL character in a string field is a 4xx with the SPEC error body, never a 500', async (t) => {
  const cases: Array<[string, string, string, Record<string, string>, unknown, number]> = [
    ['token userId', 'POST', '/rest/v1/auth/token', {}, { ...token, userId: 'a\u0000b' }, 400],
    // Strings are checked before credentials: a NUL is a malformed field (400), like an empty one.
    ['token keyId', 'POST', '/rest/v1/auth/token', {}, { ...token, keyId: 'ak_\u0000', userId: 'nul-user' }, 400],
    ['token keySecret', 'POST', '/rest/v1/auth/token', {}, { ...token, keySecret: 'sk_\u0000', userId: 'nul-user' }, 400],
    ['token agentId', 'POST', '/rest/v1/auth/token', {}, { ...token, agentId: '\u0000', userId: 'nul-user' }, 400],
    ['token expiresIn', 'POST', '/rest/v1/auth/token', {}, { ...token, expiresIn: '1h\u0000', userId: 'nul-user' }, 400],
    ['invalidate keyId', 'POST', '/rest/v1/auth/invalidate-token', {}, { ...token, keyId: '\u0000', customerUserId: issued.user.id }, 400],
    ['invalidate customerUserId', 'POST', '/rest/v1/auth/invalidate-token', {}, { ...token, customerUserId: '\u0000' }, 400],
    ['company name', 'POST', '/admin/v1/companies', ADMIN, { name: 'a\u0000' }, 400],
    ['company rename', 'PATCH', `/admin/v1/companies/${acme.companyId}`, ADMIN, { name: 'a\u0000' }, 400],
    ['company defaultAgentId', 'PATCH', `/admin/v1/companies/${acme.companyId}`, ADMIN, { defaultAgentId: '\u0000' }, 400],
    ['agent name', 'POST', `/admin/v1/companies/${acme.companyId}/agents`, ADMIN, { name: 'a\u0000' }, 400],
    ['agent rename', 'PATCH', `/admin/v1/agents/${acme.agentId}`, ADMIN, { name: 'a\u0000' }, 400],
    ['api key name', 'POST', `/admin/v1/companies/${acme.companyId}/api-keys`, ADMIN, { name: 'a\u0000' }, 400],
  ]
  for (const [label, method, url, headers, payload, status] of cases) {
    const before = await snapshotRows(node)
    const response = await node.inject({ method: method as 'POST', url, headers, payload: payload as object })
    t.equal(response.statusCode, status, label)
    const body = response.json()
    t.strictSame(Object.keys(body), ['statusCode', 'message', 'code'], `${label}: the error body`)
    t.equal(body.statusCode, status, label)
    t.equal(await snapshotRows(node), before, `${label}: no row changed`)
  }
  const deleted = await node.admin('DELETE', '/admin/v1/api-keys/ak_%00')
  t.equal(deleted.statusCode, 404, 'DELETE an api key id with a NUL')
  t.strictSame(deleted.json(), errorBody(404, 'API key not found', 'NOT_FOUND'))
})

t.test('prototype-poisoning and deeply nested JSON are refused with a 400', async (t) => {
  for (const [label, payload] of [
    ['__proto__', `{"__proto__":{"admin":true},"keyId":"${acme.keyId}","keySecret":"${acme.keySecret}","userId":"proto"}`],
    ['constructor.prototype', `{"constructor":{"prototype":{"admin":true}},"keyId":"${acme.keyId}","keySecret":"${acme.keySecret}","userId":"proto"}`],
  ] as Array<[string, string]>) {
    const before = await snapshotRows(node)
    const response = await post(node, '/rest/v1/auth/token', payload, { 'content-type': 'application/json' })
    t.equal(response.statusCode, 400, label)
    t.strictSame(response.json(), INVALID_JSON, label)
    t.equal(await snapshotRows(node), before, `${label}: no row changed`)
  }
  const nested = '['.repeat(8000) + ']'.repeat(8000)
  const response = await post(node, '/rest/v1/auth/token', nested, { 'content-type': 'application/json' })
  t.equal(response.statusCode, 400, 'deeply nested arrays')
  t.equal(response.json().statusCode, 400)
})

t.test('odd paths and methods are a 404 ROUTE_NOT_FOUND with the SPEC error body', async (t) => {
  const cases: Array<[InjectOptions['method'], string, string]> = [
    ['GET', '/rest/v1/auth/token', 'Route GET /rest/v1/auth/token not found'],
    ['PUT', '/rest/v1/auth/token', 'Route PUT /rest/v1/auth/token not found'],
    ['DELETE', '/rest/v1/auth/token', 'Route DELETE /rest/v1/auth/token not found'],
    ['GET', '/rest/v1/auth/token?keySecret=secret', 'Route GET /rest/v1/auth/token not found'],
    ['GET', '/rest/v1/auth/invalidate-token', 'Route GET /rest/v1/auth/invalidate-token not found'],
    ['POST', '/rest/v1/auth/token/extra', 'Route POST /rest/v1/auth/token/extra not found'],
    ['POST', '/rest/v1/auth/tokens', 'Route POST /rest/v1/auth/tokens not found'],
    ['GET', '/rest/v1/auth/verifyx', 'Route GET /rest/v1/auth/verifyx not found'],
    ['GET', '/', 'Route GET / not found'],
    ['GET', '/rest/v2/auth/token', 'Route GET /rest/v2/auth/token not found'],
  ]
  for (const [method, url, message] of cases) {
    const response = await node.inject({ method, url })
    t.equal(response.statusCode, 404, `${method} ${url}`)
    t.strictSame(response.json(), errorBody(404, message, 'ROUTE_NOT_FOUND'), `${method} ${url}`)
  }
  const withQuery = await post(node, '/rest/v1/auth/token?debug=1', { ...token, userId: 'query-user' })
  t.equal(withQuery.statusCode, 200, 'a query string on a POST route is ignored')
})

t.test('a URL that is not valid percent-encoding is a 4xx with the SPEC error body', async (t) => {
  for (const url of ['/rest/v1/%zz', `/admin/v1/companies/%zz`, '/rest/v1/auth/token%']) {
    const response = await node.inject({ method: 'POST', url, headers: ADMIN, payload: {} })
    t.ok(response.statusCode >= 400 && response.statusCode < 500, `${url}: ${response.statusCode}`)
    t.strictSame(Object.keys(response.json()), ['statusCode', 'message', 'code'], `${url}: the error body ${response.body}`)
  }
})

t.test('after all of it: the tenant still works, no request answered 5xx, no secret or JWT in the log', async (t) => {
  const again = await issueToken(node, acme, 'existing-user')
  t.equal(again.user.id, issued.user.id)
  t.equal((await verify(node, again.token)).statusCode, 200)
  t.strictSame(await serverErrorCounts(node), [])
  t.strictSame(leakedLogLines(node.logs), [])
})
