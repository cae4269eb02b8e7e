/**
 * The introspection answer (RFC 7662, SPEC §9.1) is typed twice: by the server
 * (src/auth/oauth.ts) and by the client (src/client/types.ts), which imports nothing of the
 * server. Both are held here to the API description: the schema the route answers with
 * (src/routes/oauth.ts), as GET /openapi.json serves it. The types are compared when the
 * tests are type-checked (`npm run typecheck`); the document and a real answer, when this runs.
 */
import type { Static } from '@sinclair/typebox'
import t from 'tap'
import type { Introspection as ServerIntrospection } from '../../../src/auth/oauth.js'
import type { Introspection as ClientIntrospection } from '../../../src/client/types.js'
import { IntrospectionResponse } from '../../../src/routes/oauth.js'
import { createTenant, issueToken, startApp } from '../../support/helpers.js'

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
type Documented = Static<typeof IntrospectionResponse>
type Active<T> = Extract<T, { active: true }>
type Inactive<T> = Extract<T, { active: false }>

/** Every field of an active answer, as a list the run can compare with the document. */
const ACTIVE_FIELDS = ['active', 'sub', 'exp', 'iat', 'jti', 'token_type', 'client_id', 'iss', 'aud', 'company_id', 'agent_id', 'token_version', 'ext_id'] as const

// Compile-time: the two types are one and the same; an active answer has exactly the
// document's fields (the list above, too), and each answer is one the document describes.
const checks: Array<true> = [
  true satisfies Equal<ServerIntrospection, ClientIntrospection>,
  true satisfies Equal<keyof Active<ServerIntrospection>, keyof Documented>,
  true satisfies Equal<keyof Active<ClientIntrospection>, keyof Documented>,
  true satisfies Equal<(typeof ACTIVE_FIELDS)[number], keyof Documented>,
  true satisfies Equal<keyof Inactive<ServerIntrospection>, 'active'>,
  true satisfies (Active<ServerIntrospection> extends Documented ? (Inactive<ServerIntrospection> extends Documented ? true : false) : false),
  true satisfies (Active<ClientIntrospection> extends Documented ? (Inactive<ClientIntrospection> extends Documented ? true : false) : false),
]

const node = await startApp(t)

t.test('the served description holds the schema the types are checked against', async (t) => {
  t.equal(checks.length, 7)
  const document = (await node.inject({ method: 'GET', url: '/openapi.json' })).json()
  const schema = document.paths['/oauth2/introspect'].post.responses['200'].content['application/json'].schema
  t.same(Object.keys(schema.properties), ACTIVE_FIELDS, 'the fields, in order')
  t.same(schema.required, ['active'], 'only `active` is always there')
  // @fastify/swagger writes a `const` as a one-value `enum`
  const declared = JSON.parse(JSON.stringify(IntrospectionResponse.properties), (_key, value) =>
    value !== null && typeof value === 'object' && 'const' in value ? { ...Object.fromEntries(Object.entries(value).filter(([k]) => k !== 'const')), enum: [value.const] } : value,
  )
  t.same(schema.properties, declared, 'each field as the route declares it')
})

t.test('a real answer has the fields of the types, of the documented kinds', async (t) => {
  const tenant = await createTenant(node)
  const { token } = await issueToken(node, tenant, 'introspected')
  const basic = `Basic ${Buffer.from(`${tenant.keyId}:${tenant.keySecret}`).toString('base64')}`
  const answer = async (token: string) =>
    (await node.inject({ method: 'POST', url: '/oauth2/introspect', headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' }, payload: `token=${token}` })).json()
  const active = (await answer(token)) as Record<string, unknown>
  t.equal(active.active, true)
  const kinds: Record<string, string> = { active: 'boolean', exp: 'number', iat: 'number', token_version: 'number' }
  for (const [field, value] of Object.entries(active)) {
    t.ok((ACTIVE_FIELDS as readonly string[]).includes(field), `${field} is documented`)
    t.equal(typeof value, kinds[field] ?? 'string', `${field}: ${kinds[field] ?? 'string'}`)
  }
  t.strictSame(await answer('not-a-token'), { active: false }, 'an inactive one: `active` alone')
})
