/**
 * Issue 10, finding 8: whatever is logged as `err` keeps its detail. A string (or any other
 * non-Error) handed to pino's `err` used to come out as `"err":{}`.
 */
import { Writable } from 'node:stream'
import t from 'tap'
import { createLogger } from '../../src/logger.js'

function logged(value: unknown): Record<string, unknown> {
  const lines: string[] = []
  const logger = createLogger({ logLevel: 'info' }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }))
  logger.error({ err: value }, 'something failed')
  return JSON.parse(lines[0]!).err
}

t.test('an Error keeps its type, message, code and stack', async (t) => {
  const error = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' })
  const err = logged(error)
  t.equal(err.type, 'Error')
  t.equal(err.message, 'connect ECONNREFUSED 127.0.0.1:6379')
  t.equal(err.code, 'ECONNREFUSED')
  t.match(err.stack, /^Error: connect ECONNREFUSED/)
})

t.test('a string keeps its text', async (t) => {
  t.same(logged('redis command connection error: ECONNRESET'), { type: 'string', message: 'redis command connection error: ECONNRESET' })
})

t.test('any other value is described, not dropped', async (t) => {
  t.same(logged(42), { type: 'number', message: '42' })
  t.same(logged({ reason: 'lost', token: 'eyJ.secret' }), { type: 'object', message: 'an object with reason, token' }, 'its field names, never their values')
})
