import { createPublicKey, generateKeyPairSync, verify as verifySignature } from 'node:crypto'
import t from 'tap'
import { createTenant, decodeToken, forgeHs256, issueToken, JWT_SECRET, nowSeconds, sharedDb, startApp, verify } from './support/helpers.js'

const pem = (type: 'ec' | 'ed25519' | 'rsa') => {
  const options = type === 'ec' ? { namedCurve: 'P-256' } : type === 'rsa' ? { modulusLength: 2048 } : {}
  const { privateKey } = generateKeyPairSync(type as 'ec', options as { namedCurve: string })
  return privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
}

t.test('asymmetric algorithms sign, verify and publish their public key', async (t) => {
  const db = await sharedDb(t)
  for (const [alg, type] of [['ES256', 'ec'], ['EdDSA', 'ed25519'], ['RS256', 'rsa']] as const) {
    t.test(alg, async (t) => {
      const node = await startApp(t, { JWT_SECRET: '', JWT_ALGORITHM: alg, JWT_PRIVATE_KEY: pem(type) }, { db })
      const tenant = await createTenant(node, `${alg} co`)
      const issued = await issueToken(node, tenant, 'asym-user')
      const { header } = decodeToken(issued.token)
      t.equal(header.alg, alg)
      t.equal(header.typ, 'JWT')
      t.type(header.kid, 'string')
      t.equal((await verify(node, issued.token)).statusCode, 200)

      const jwks = (await node.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json()
      t.equal(jwks.keys.length, 1)
      const jwk = jwks.keys[0]
      t.equal(jwk.kid, header.kid)
      t.equal(jwk.alg, alg)
      t.equal(jwk.use, 'sig')
      t.notOk('d' in jwk, 'no private part is published')
      // Anyone holding the JWKS can check the signature without this service.
      const [h, p, s] = issued.token.split('.')
      const key = createPublicKey({ key: jwk, format: 'jwk' })
      const digest = alg === 'EdDSA' ? null : 'sha256'
      const signature = Buffer.from(s!, 'base64url')
      const ok = verifySignature(digest, Buffer.from(`${h}.${p}`), alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' } : key, signature)
      t.ok(ok, 'the published key verifies the token')

      // Algorithm confusion: an HS256 token keyed with the public key PEM, under the asymmetric kid.
      const publicPem = key.export({ format: 'pem', type: 'spki' }).toString()
      const confused = forgeHs256({ alg: 'HS256', typ: 'JWT', kid: header.kid }, decodeToken(issued.token).payload, publicPem)
      t.equal((await verify(node, confused)).json().message, 'Invalid token')
    })
  }
})

t.test('HS256 publishes no key', async (t) => {
  const node = await startApp(t)
  t.same((await node.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json(), { keys: [] })

  t.test('alg none and foreign algorithms under our kid are Invalid token', async (t) => {
    const tenant = await createTenant(node, 'none co')
    const issued = await issueToken(node, tenant, 'none-user')
    const { header, payload } = decodeToken(issued.token)
    const encode = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url')
    const none = `${encode({ ...header, alg: 'none' })}.${encode(payload)}.`
    t.equal((await verify(node, none)).json().message, 'Invalid token')
    const hs512 = forgeHs256({ ...header, alg: 'HS512' }, payload)
    t.equal((await verify(node, hs512)).json().message, 'Invalid token')
    const noKid = forgeHs256({ alg: 'HS256', typ: 'JWT' }, payload)
    t.equal((await verify(node, noKid)).json().message, 'Invalid token')
    t.equal((await verify(node, forgeHs256(header, payload))).statusCode, 200, 'the same forge with our header and key passes')
  })
})

t.test('key rotation: the newest key signs, every configured key verifies, a retired key does not', async (t) => {
  const db = await sharedDb(t)
  const oldSecret = JWT_SECRET
  const newSecret = 'the-new-signing-secret-with-more-than-32-bytes'
  const before = await startApp(t, { JWT_SECRET: oldSecret }, { db })
  const tenant = await createTenant(before, 'rotation co')
  const oldToken = (await issueToken(before, tenant, 'rotating-user')).token

  const during = await startApp(t, { JWT_SECRET: '', JWT_KEYS: JSON.stringify([{ alg: 'HS256', secret: newSecret }, { alg: 'HS256', secret: oldSecret }]) }, { db })
  const newToken = (await issueToken(during, tenant, 'rotating-user')).token
  t.not(decodeToken(newToken).header.kid, decodeToken(oldToken).header.kid, 'the new key signs')
  t.equal((await verify(during, oldToken)).statusCode, 200, 'a token of the previous key still verifies')
  t.equal((await verify(during, newToken)).statusCode, 200)

  const after = await startApp(t, { JWT_SECRET: newSecret }, { db })
  const retired = await verify(after, oldToken)
  t.equal(retired.statusCode, 401)
  t.equal(retired.json().message, 'Invalid token', 'the retired key no longer verifies')
  t.equal((await verify(after, newToken)).statusCode, 200)
})

t.test('a token from another secret with our kid is Invalid token', async (t) => {
  const node = await startApp(t)
  const tenant = await createTenant(node)
  const { header, payload } = decodeToken((await issueToken(node, tenant, 'x')).token)
  const forged = forgeHs256(header, { ...payload, exp: nowSeconds() + 60 }, 'an-attackers-secret-that-is-32-bytes-long!!')
  t.equal((await verify(node, forged)).json().code, 'INVALID_TOKEN')
})
