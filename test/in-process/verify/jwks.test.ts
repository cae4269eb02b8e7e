import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { sharedDb, startApp, type TestApp } from '../../support/helpers.js'

/**
 * `GET /.well-known/jwks.json` is cacheable: `Cache-Control: public, max-age=<JWKS_MAX_AGE>`
 * and a strong ETag of the key set, so that a verifier elsewhere revalidates with
 * `If-None-Match` (304, no body) and learns a rotation's new key within max-age.
 */
const es256 = () => ({ alg: 'ES256', privateKey: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString() })
const keys = (...list: Array<ReturnType<typeof es256>>) => ({ JWT_SECRET: '', JWT_KEYS: JSON.stringify(list) })
const STRONG_ETAG = /^"[A-Za-z0-9_-]{22}"$/

function jwks(node: TestApp, headers: Record<string, string> = {}) {
  return node.inject({ method: 'GET', url: '/.well-known/jwks.json', headers })
}

t.test('the key set answers with its caching headers: public, max-age 300 by default, a strong ETag', async (t) => {
  const node = await startApp(t, keys(es256()))
  const answer = await jwks(node)
  t.equal(answer.statusCode, 200)
  t.equal(answer.headers['cache-control'], 'public, max-age=300')
  t.match(answer.headers.etag, STRONG_ETAG, 'a strong entity tag (no W/)')
  t.equal(answer.headers['content-type'], 'application/json; charset=utf-8')
  t.equal(answer.json().keys.length, 1)
  t.equal(answer.json().keys[0].alg, 'ES256')
  const again = await jwks(node)
  t.equal(again.headers.etag, answer.headers.etag, 'the same key set, the same tag')
  t.equal(again.body, answer.body, 'and the same bytes')
})

t.test('JWKS_MAX_AGE sets the max-age', async (t) => {
  const db = await sharedDb(t)
  t.equal((await jwks(await startApp(t, { JWKS_MAX_AGE: '60' }, { db }))).headers['cache-control'], 'public, max-age=60')
  t.equal((await jwks(await startApp(t, { JWKS_MAX_AGE: '0' }, { db }))).headers['cache-control'], 'public, max-age=0', '0: revalidate every time')
})

t.test('If-None-Match that names the current key set gets 304 with no body; anything else the whole answer', async (t) => {
  const node = await startApp(t, keys(es256()))
  const full = await jwks(node)
  const etag = full.headers.etag as string
  const opaque = etag.slice(1, -1)
  const matching: Array<[string, string]> = [
    ['the tag itself', etag],
    ['the weak form of it (weak comparison)', `W/${etag}`],
    ['a list holding it', `"some-older-tag", ${etag}`],
    ['a list whose other tag holds a comma', `"a,b",${etag}`],
    ['two headers, joined', `"some-older-tag", W/${etag}`],
    ['*', '*'],
  ]
  for (const [name, header] of matching) {
    const answer = await jwks(node, { 'if-none-match': header })
    t.equal(answer.statusCode, 304, `${name}: 304`)
    t.equal(answer.body, '', `${name}: no body`)
    t.equal(answer.headers.etag, etag, `${name}: the ETag again`)
    t.equal(answer.headers['cache-control'], 'public, max-age=300', `${name}: the Cache-Control again (RFC 9110 §15.4.5)`)
  }
  const missing: Array<[string, string]> = [
    ['another tag', '"some-older-tag"'],
    ['the tag without its quotes', opaque],
    ['the tag inside a longer one', `"x${opaque}"`],
    ['an empty header', ''],
    ['a list of others', '"a", W/"b"'],
  ]
  for (const [name, header] of missing) {
    const answer = await jwks(node, { 'if-none-match': header })
    t.equal(answer.statusCode, 200, `${name}: 200`)
    t.equal(answer.body, full.body, `${name}: the whole key set`)
    t.equal(answer.headers.etag, etag)
  }
})

t.test('the ETag changes with every phase of a rotation, and nodes with the same keys agree on it', async (t) => {
  const db = await sharedDb(t)
  const [old, fresh] = [es256(), es256()]
  const phases = [
    ['before', [old]],
    ['phase 1', [old, fresh]],
    ['phase 2', [fresh, old]],
    ['old key dropped', [fresh]],
  ] as const
  const tags: string[] = []
  for (const [phase, list] of phases) {
    const [a, b] = [await startApp(t, keys(...list), { db }), await startApp(t, keys(...list), { db })]
    const [fromA, fromB] = [await jwks(a), await jwks(b)]
    t.equal(fromA.headers.etag, fromB.headers.etag, `${phase}: two nodes of the same keys, one ETag`)
    t.equal(fromA.json().keys.length, list.length, `${phase}: ${list.length} keys published`)
    const previous = tags.at(-1)
    if (previous !== undefined) {
      const revalidated = await jwks(a, { 'if-none-match': previous })
      t.equal(revalidated.statusCode, 200, `${phase}: the previous phase's tag gets the new key set`)
      t.equal(revalidated.body, fromA.body)
    }
    tags.push(fromA.headers.etag as string)
  }
  t.equal(new Set(tags).size, phases.length, 'four key sets, four tags')
})
