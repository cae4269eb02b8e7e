import { ADMIN_TOKEN } from './constants.js'

/** The HTTP API as a client sees it, over fetch: for tests that talk to real node processes. */
export interface Answer<T = any> {
  status: number
  body: T
}

export async function call<T = any>(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer<T>> {
  const response = await fetch(base + path, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  })
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // not JSON
  }
  return { status: response.status, body: parsed as T }
}

export const admin = <T = any>(base: string, method: string, path: string, body?: unknown) =>
  call<T>(base, method, path, body, { authorization: `Bearer ${ADMIN_TOKEN}` })

export const verify = (base: string, token: string) => call(base, 'GET', '/rest/v1/auth/verify', undefined, { authorization: `Bearer ${token}` })

/** A company with one agent and one API key, made through the admin API of SPEC §4. */
export async function setupCompany(base: string, name = 'Acme'): Promise<{ companyId: string; agentId: string; keyId: string; keySecret: string }> {
  const company = await admin(base, 'POST', '/admin/v1/companies', { name })
  if (company.status !== 201) throw new Error(`create company: ${company.status} ${JSON.stringify(company.body)}`)
  const agent = await admin(base, 'POST', `/admin/v1/companies/${company.body.id}/agents`, { name: 'Agent' })
  if (agent.status !== 201) throw new Error(`create agent: ${agent.status} ${JSON.stringify(agent.body)}`)
  const key = await admin(base, 'POST', `/admin/v1/companies/${company.body.id}/api-keys`, { name: 'key' })
  if (key.status !== 201) throw new Error(`create key: ${key.status} ${JSON.stringify(key.body)}`)
  return { companyId: company.body.id, agentId: agent.body.id, keyId: key.body.keyId, keySecret: key.body.keySecret }
}
