/**
 * A token for a user the node has cached is answered without a promise: the key, the user,
 * its agent and its company come from the caches, and each step of SPEC §3.1 goes on at once
 * (src/routes/token.ts). A step that needs the store still answers with a promise, and a
 * wrong secret is still a rejected promise (the failure is counted before the 401).
 */
import t from 'tap'
import { ApiError } from '../../../src/errors.js'
import { createTenant, issueToken, startApp } from '../../support/helpers.js'

t.test('every step of a token for a cached user answers at once; a step that reads the store answers with a promise', async (t) => {
  const node = await startApp(t)
  const acme = await createTenant(node)
  const first = await issueToken(node, acme, 'cached-1')
  // the first token created the user and noted its id; the second read the user into the cache
  await issueToken(node, acme, 'cached-1')
  const { authenticateApiKey, tokens } = node.gateway

  const key = authenticateApiKey(acme.keyId, acme.keySecret)
  t.notOk(key instanceof Promise, 'the cached key with its secret: a value')
  if (key instanceof Promise) return
  t.equal(key.companyId, acme.companyId)

  const user = tokens.findOrCreateUser(acme.companyId, 'cached-1', undefined)
  t.notOk(user instanceof Promise, 'the cached user: a value')
  if (user instanceof Promise) return
  t.equal(user.id, first.user.id)
  const agent = tokens.agentOfCompany(acme.companyId, user.agentId)
  t.notOk(agent instanceof Promise, 'its cached agent: a value')
  if (agent instanceof Promise) return
  const signed = tokens.sign(user, agent, 60)
  t.notOk(signed instanceof Promise, 'signed with the cached company: a value')

  const unseen = tokens.findOrCreateUser(acme.companyId, 'never-seen', undefined)
  t.ok(unseen instanceof Promise, 'a user not in the cache: a promise (a store read, then the insert)')
  t.equal((await unseen).externalId, 'never-seen')

  const wrong = authenticateApiKey(acme.keyId, acme.keySecret.slice(0, -1) + (acme.keySecret.endsWith('A') ? 'B' : 'A'))
  t.ok(wrong instanceof Promise, 'a wrong secret: a promise')
  const refusal = await (wrong as Promise<unknown>).then(() => undefined, (error: unknown) => error)
  t.ok(refusal instanceof ApiError && refusal.statusCode === 401 && refusal.code === 'INVALID_API_CREDENTIALS', 'rejected with the 401')

  const again = await issueToken(node, acme, 'cached-1')
  t.equal(again.user.id, first.user.id, 'and over HTTP the same user gets its token')
})
