/** src/jwt/claims-json.ts: a token's claims written out are exactly JSON.stringify's text of them. */
import t from 'tap'
import fc from 'fast-check'
import { claimsJson } from '../../src/jwt/claims-json.js'
import type { SignedClaims } from '../../src/jwt/keyring.js'

const text = fc.string({ unit: 'binary', maxLength: 60 })
const integer = fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER })
// Keys in SignedClaims' order, as the token issuer (src/auth/issue-token.ts) sets them, its ids
// UUIDs; the optional ones present or not, iss and aud any string.
const claims = fc
  .record(
    { sub: fc.uuid(), tokenVersion: integer, companyId: fc.uuid(), agentId: fc.uuid(), iat: integer, exp: integer, jti: fc.uuid(), cgen: integer, agen: integer, iss: text, aud: text },
    { requiredKeys: ['sub', 'tokenVersion', 'companyId', 'agentId', 'iat', 'exp', 'jti'] },
  )
  .map((drawn) => drawn as SignedClaims)

t.test('equals JSON.stringify for every set of claims fast-check draws', async (t) => {
  fc.assert(
    fc.property(claims, (drawn) => claimsJson(drawn) === JSON.stringify(drawn)),
    { numRuns: 5000 },
  )
  t.pass('5,000 drawn sets of claims')
})

t.test('a token issuer\'s claims, with and without iss and aud', async (t) => {
  const base = { sub: '6f1c2a4e-9b7d-4c1e-8f00-0123456789ab', tokenVersion: 3, companyId: '0b6a3c1e-1d2f-4e5a-9b8c-7d6e5f4a3b2c', agentId: 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d', iat: 1_764_300_000, exp: 1_764_386_400, jti: '11111111-2222-4333-8444-555555555555', cgen: 0, agen: 2 }
  t.equal(claimsJson(base), JSON.stringify(base))
  const named = { ...base, iss: 'https://chat.example/"auth"', aud: 'chat ✓' }
  t.equal(claimsJson(named), JSON.stringify(named))
  t.same(JSON.parse(claimsJson(named)), named)
})
