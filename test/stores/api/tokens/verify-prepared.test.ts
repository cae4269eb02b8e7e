/**
 * The verify route serialises an allowed answer once per token and reuses the bytes
 * (src/routes/verify/answer.ts, preparedAnswer); each kind of refusal is serialised once
 * (preparedDenial).
 * Every check still runs per request, and the bytes are reused only while the identity they
 * were made from is the same: the same token verified again after a change answers the new
 * identity, or the refusal, at once.
 */
import t, { type Test } from 'tap'
import { createTenant, invalidate, issueToken, startApp, verify, type TestApp } from '../../../support/helpers.js'
import { AGENT_INACTIVE, INVALID_TOKEN, MISSING_BEARER_TOKEN, TOKEN_REVOKED as REVOKED } from '../../../support/spec-bodies.js'

async function allowed(t: Test, node: TestApp, token: string, label: string) {
  const response = await verify(node, token)
  t.equal(response.statusCode, 200, `${label}: 200`)
  t.equal(response.headers['cache-control'], 'no-store', `${label}: cache-control`)
  t.equal(response.headers['content-type'], 'application/json; charset=utf-8', `${label}: content-type`)
  t.equal(Number(response.headers['content-length']), Buffer.byteLength(response.body), `${label}: content-length`)
  return response
}

t.test('the same token verified again: the same bytes while nothing changed, the new identity or a refusal after a change', async (t) => {
  const node = await startApp(t)
  const acme = await createTenant(node)
  const issued = await issueToken(node, acme, 'prepared-1')

  const first = await allowed(t, node, issued.token, 'first')
  const again = await allowed(t, node, issued.token, 'again')
  t.equal(again.body, first.body, 'nothing changed: the same body')
  t.same(again.json().agent, { id: acme.agentId, name: acme.agentName, active: true })

  // the agent renamed: the next answer names it so
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { name: 'Renamed agent' })).statusCode, 200)
  const renamed = await allowed(t, node, issued.token, 'renamed')
  t.same(renamed.json().agent, { id: acme.agentId, name: 'Renamed agent', active: true }, 'the new name, not the bytes made before')
  t.same(renamed.json().user, first.json().user)

  // the agent deactivated: refused, though an answer for this token was prepared
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: false })).statusCode, 200)
  const inactive = await verify(node, issued.token)
  t.equal(inactive.statusCode, 401)
  t.same(inactive.json(), AGENT_INACTIVE)
  t.equal((await node.admin('PATCH', `/admin/v1/agents/${acme.agentId}`, { active: true })).statusCode, 200)
  await allowed(t, node, issued.token, 'reactivated')

  // invalidated: the prepared answer of the old token is never sent again
  t.equal((await invalidate(node, acme, issued.user.id)).statusCode, 200)
  const revoked = await verify(node, issued.token)
  t.equal(revoked.statusCode, 401)
  t.same(revoked.json(), REVOKED)

  // the new token: its own answer, with the new version
  const next = await issueToken(node, acme, 'prepared-1')
  const current = await allowed(t, node, next.token, 'new token')
  t.equal(current.json().tokenVersion, decodeVersion(next.token))
  t.not(current.json().tokenVersion, first.json().tokenVersion)
  t.equal((await verify(node, issued.token)).statusCode, 401, 'the old one still refused after the new one was answered')
})

t.test('two users behind tokens verified in turn: each answer is its own', async (t) => {
  const node = await startApp(t)
  const acme = await createTenant(node)
  const a = await issueToken(node, acme, 'prepared-a')
  const b = await issueToken(node, acme, 'prepared-b')
  for (let round = 0; round < 3; round++) {
    const ra = await allowed(t, node, a.token, `a, round ${round}`)
    const rb = await allowed(t, node, b.token, `b, round ${round}`)
    t.equal(ra.json().user.externalId, 'prepared-a')
    t.equal(ra.headers['x-auth-external-id'], 'prepared-a')
    t.equal(rb.json().user.externalId, 'prepared-b')
    t.equal(rb.headers['x-auth-user-id'], b.user.id)
  }
})

t.test('refusals of different causes in turn: each its own body, with the headers of a 401, on every method', async (t) => {
  const node = await startApp(t)
  const acme = await createTenant(node)
  const revokedToken = (await issueToken(node, acme, 'prepared-refused')).token
  t.equal((await invalidate(node, acme, (await issueToken(node, acme, 'prepared-refused')).user.id)).statusCode, 200)
  const current = (await issueToken(node, acme, 'prepared-refused')).token
  const cases = [
    { label: 'revoked', token: revokedToken, body: REVOKED },
    { label: 'no token', token: undefined, body: MISSING_BEARER_TOKEN },
    { label: 'forged', token: revokedToken.slice(0, -4) + 'AAAA', body: INVALID_TOKEN },
  ]
  const seen = new Map<string, string>()
  for (let round = 0; round < 2; round++) {
    for (const { label, token, body } of cases) {
      for (const method of ['GET', 'POST', 'HEAD'] as const) {
        const response = await verify(node, token, { method })
        const what = `${label}, ${method}, round ${round}`
        t.equal(response.statusCode, 401, `${what}: 401`)
        t.equal(response.headers['www-authenticate'], 'Bearer error="invalid_token"', `${what}: the challenge`)
        t.equal(response.headers['cache-control'], 'no-store', `${what}: cache-control`)
        if (method === 'HEAD') {
          t.equal(response.body, '', `${what}: no body`)
          t.equal(response.headers['content-length'], undefined, `${what}: no length`)
          continue
        }
        t.same(response.json(), body, `${what}: its own body`)
        t.equal(response.headers['content-type'], 'application/json; charset=utf-8', `${what}: content-type`)
        t.equal(Number(response.headers['content-length']), Buffer.byteLength(response.body), `${what}: content-length`)
        const before = seen.get(label)
        if (before !== undefined) t.equal(response.body, before, `${what}: the same bytes as before`)
        seen.set(label, response.body)
      }
    }
    // an allowed answer between the refusals takes nothing of theirs
    const ok = await allowed(t, node, current, `allowed, round ${round}`)
    t.equal(ok.headers['www-authenticate'], undefined, `allowed, round ${round}: no challenge`)
  }
})

function decodeVersion(token: string): number {
  return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as { tokenVersion: number }).tokenVersion
}
