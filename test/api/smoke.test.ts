import t from 'tap'
import { createTenant, issueToken, startApp, verify } from '../support/helpers.js'

t.test('a token verifies', async (t) => {
  const node = await startApp(t)
  const tenant = await createTenant(node)
  const issued = await issueToken(node, tenant, 'u1')
  const res = await verify(node, issued.token)
  t.equal(res.statusCode, 200)
})
