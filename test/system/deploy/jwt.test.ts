import { createPublicKey, generateKeyPairSync, verify as verifySignature } from 'node:crypto'
import t from 'tap'
import { createMessageCodec, deriveBusKeys } from '../../../src/bus/messages/messages.js'
import type { JwtKeyConfig } from '../../../src/config.js'
import { createTenant, decodeToken, forgeHs256, issueToken, JWT_SECRET, nowSeconds, sharedDb, startApp, storeIndependentTest, verify } from '../../support/helpers.js'

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

/** Whether a node with keys `b` authenticates a change and an ack sent by a node with keys `a`. */
function busUnderstands(a: JwtKeyConfig[], b: JwtKeyConfig[]): boolean {
  const [sender, receiver] = [createMessageCodec('chat-auth', deriveBusKeys(a)), createMessageCodec('chat-auth', deriveBusKeys(b))]
  const change = receiver.readChange(sender.change({ id: 'm1', from: 'node-a', row: { kind: 'user', id: 'u1', revision: 1 } }))
  const ack = receiver.readAck(sender.ack({ id: 'm1', node: 'node-a' }))
  return change.ok && ack.ok
}

storeIndependentTest('the two-phase rotation keeps the Redis bus authenticated between every pair of phases; the one-step and the publicKey-only ones do not', async (t) => {
  for (const [kind, old, next] of [
    ['HS256', { alg: 'HS256', secret: 'the-old-bus-rotation-secret-of-at-least-32-bytes' }, { alg: 'HS256', secret: 'the-new-bus-rotation-secret-of-at-least-32-bytes' }],
    ['ES256', { alg: 'ES256', privateKey: pem('ec') }, { alg: 'ES256', privateKey: pem('ec') }],
  ] as Array<[string, JwtKeyConfig, JwtKeyConfig]>) {
    const phases: Record<string, JwtKeyConfig[]> = { before: [old], 'phase 1': [old, next], 'phase 2': [next, old] }
    const names = Object.keys(phases)
    // A rolling restart puts each phase beside the one before it; the nodes also run a phase beside itself.
    for (let i = 0; i < names.length; i++) {
      for (const j of [i, i + 1].filter((j) => j < names.length)) {
        const [a, b] = [phases[names[i]!]!, phases[names[j]!]!]
        t.ok(busUnderstands(a, b) && busUnderstands(b, a), `${kind}: ${names[i]} and ${names[j]} authenticate each other's messages`)
      }
    }
    t.ok(busUnderstands([next, old], [old]) && busUnderstands([old], [next, old]), `${kind}: the one-step rotation still shares the old key on the bus (its tokens are what break)`)
    t.notOk(busUnderstands([next], [old]), `${kind}: a node without the old key and one without the new one share no bus key (the bad rotation of test/system/redis/redis-bus.test.ts)`)
  }
  // Asymmetric keys: a public key gives no bus key, so a phase 1 that lists only the new
  // public key and a phase 2 that keeps only the old public key share nothing. docs/operations.md
  // says to list both private keys until every node runs phase 2.
  const [oldKey, newKey] = [pem('ec'), pem('ec')]
  const publicOf = (privateKey: string) => createPublicKey(privateKey).export({ format: 'pem', type: 'spki' }).toString()
  const phase1PublicOnly: JwtKeyConfig[] = [{ alg: 'ES256', privateKey: oldKey }, { alg: 'ES256', publicKey: publicOf(newKey) }]
  const phase2PublicOnly: JwtKeyConfig[] = [{ alg: 'ES256', privateKey: newKey }, { alg: 'ES256', publicKey: publicOf(oldKey) }]
  t.notOk(busUnderstands(phase1PublicOnly, phase2PublicOnly), 'ES256 with only public keys beside the signing one: the two phases share no bus key')
  t.ok(busUnderstands(phase1PublicOnly, [{ alg: 'ES256', privateKey: newKey }, { alg: 'ES256', privateKey: oldKey }]), 'and keeping the old private key in phase 2 is enough')
})

t.test('phase 1 of an asymmetric rotation: the new key verifies and is published, the old one still signs', async (t) => {
  const db = await sharedDb(t)
  const [oldKey, newKey] = [pem('ec'), pem('ec')]
  const phase1 = await startApp(t, { JWT_SECRET: '', JWT_KEYS: JSON.stringify([{ alg: 'ES256', privateKey: oldKey }, { alg: 'ES256', privateKey: newKey }]) }, { db })
  const phase2 = await startApp(t, { JWT_SECRET: '', JWT_KEYS: JSON.stringify([{ alg: 'ES256', privateKey: newKey }, { alg: 'ES256', privateKey: oldKey }]) }, { db })
  const tenant = await createTenant(phase1, 'asymmetric rotation co')
  const [oldKid, newKid] = [phase1.gateway.keyring.signingKid, phase2.gateway.keyring.signingKid]
  const kids = async (node: typeof phase1) => (await node.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json().keys.map((key: { kid: string }) => key.kid)
  t.same(await kids(phase1), [oldKid, newKid], "phase 1's JWKS lists both keys: how an operator tells a node runs phase 1")
  t.same(await kids(phase2), [newKid, oldKid])
  t.same(phase1.gateway.keyring.kids, [oldKid, newKid], 'the kids the start-up log line names, for HS256 whose JWKS is empty')
  const fromPhase1 = (await issueToken(phase1, tenant, 'dora')).token
  const fromPhase2 = (await issueToken(phase2, tenant, 'dora')).token
  t.equal(decodeToken(fromPhase1).header.kid, oldKid, 'phase 1: the old key still signs')
  t.equal(decodeToken(fromPhase2).header.kid, newKid, 'phase 2: the new key signs')
  for (const node of [phase1, phase2]) for (const token of [fromPhase1, fromPhase2]) t.equal((await verify(node, token)).statusCode, 200)
})
