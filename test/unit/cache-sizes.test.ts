import t from 'tap'
import { stringBytes, userBytes } from '../../src/cache/sizes.js'

// V8 keeps a string of Latin-1 characters at one byte each, any other string at two (UTF-16).
t.test("a string's estimate counts one byte per Latin-1 character and two for any other", async (t) => {
  t.equal(stringBytes(''), 16)
  t.equal(stringBytes('a'.repeat(255)), 16 + 256)
  t.equal(stringBytes('é'.repeat(255)), 16 + 256, 'Latin-1 beyond ASCII is still one byte')
  t.equal(stringBytes('漢'.repeat(255)), 16 + 512)
  t.equal(stringBytes('a'.repeat(254) + '漢'), 16 + 512, 'one wider character makes the whole string two bytes a character')
})

t.test('a user with a 255-character CJK external id is estimated at three times a short-id one', async (t) => {
  const id = '7c9e6679-7425-40de-944b-e07fc1f90ae7'
  const user = (externalId: string) => ({ id, companyId: id, externalId, agentId: id, tokenVersion: 0, active: true, revision: 1 })
  const short = userBytes(id, user('user-42'))
  const cjk = userBytes(id, user('漢'.repeat(255)))
  t.ok(cjk > 2.5 * short, `${cjk} B against ${short} B`)
})
