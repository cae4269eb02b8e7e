/** src/json-text.ts: jsonString writes exactly what JSON.stringify writes, for any string. */
import t from 'tap'
import fc from 'fast-check'
import { jsonString } from '../../src/json-text.js'

t.test('the strings it quotes as they are and the ones it leaves to JSON.stringify', async (t) => {
  const cases = ['', 'user-42', '3f1c2a4e-9b7d-4c1e-8f00-0123456789ab', ' ~', 'a"b', 'back\\slash', 'tab\there', 'new\nline', '\u007f', 'é', '\u2028', '😀', '\ud800', 'x\udfffy', '\u0000', '\u001f']
  // named by their place in the list: some would break TAP's lines if printed
  for (const [i, value] of cases.entries()) t.equal(jsonString(value), JSON.stringify(value), `case ${i}`)
})

t.test('equals JSON.stringify for every string fast-check draws (UTF-16 code units, lone surrogates included)', async (t) => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary' }), (value) => jsonString(value) === JSON.stringify(value)),
    { numRuns: 5000 },
  )
  fc.assert(
    fc.property(fc.string({ unit: fc.integer({ min: 0, max: 0x7f }).map((code) => String.fromCharCode(code)) }), (value) => jsonString(value) === JSON.stringify(value)),
    { numRuns: 5000 },
  )
  t.pass('5,000 drawn strings of each kind')
})
