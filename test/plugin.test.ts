import Fastify from 'fastify'
import t from 'tap'
import { chatAuthPlugin } from '../src/plugin.js'
import { createTenant, invalidate, issueToken, startApp } from './support/helpers.js'

t.test('a Node chat backend verifies in-process with the same checks and stores', async (t) => {
  const gatewayNode = await startApp(t)
  const tenant = await createTenant(gatewayNode)
  const issued = await issueToken(gatewayNode, tenant, 'chatter')

  const chat = Fastify()
  t.teardown(() => chat.close())
  await chat.register(chatAuthPlugin, { gateway: gatewayNode.gateway })
  chat.get('/messages', { preHandler: chat.requireChatToken }, async (request) => ({ for: request.chatAuth!.user.externalId }))
  chat.get('/public', async (request) => ({ identity: request.chatAuth }))

  const allowed = await chat.inject({ url: '/messages', headers: { authorization: `Bearer ${issued.token}` } })
  t.equal(allowed.statusCode, 200)
  t.same(allowed.json(), { for: 'chatter' })
  t.same((await chat.inject({ url: '/public' })).json(), { identity: null }, 'unprotected routes see no identity')

  const missing = await chat.inject({ url: '/messages' })
  t.equal(missing.statusCode, 401)
  t.same(missing.json(), { statusCode: 401, message: 'Missing bearer token', code: 'MISSING_BEARER_TOKEN' })
  t.equal(missing.headers['www-authenticate'], 'Bearer error="invalid_token"')

  t.equal((await invalidate(gatewayNode, tenant, issued.user.id)).statusCode, 200)
  const revoked = await chat.inject({ url: '/messages', headers: { authorization: `Bearer ${issued.token}` } })
  t.equal(revoked.statusCode, 401)
  t.same(revoked.json(), { statusCode: 401, message: 'Token has been revoked', code: 'TOKEN_REVOKED' })
})
