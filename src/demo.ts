import { generateApiKey } from './auth/api-keys.js'
import type { Store } from './store/store.js'
import { VERIFY_PATH } from './routes/verify/path.js'

export interface DemoData {
  companyId: string
  agentId: string
  keyId: string
  keySecret: string
}

/** First run on an empty embedded store: a company, an agent and a key to try the API with. */
export async function seedDemo(store: Pick<Store, 'countCompanies' | 'createCompany' | 'createAgent' | 'createApiKey'>): Promise<DemoData | undefined> {  if ((await store.countCompanies()) > 0) return undefined
  const company = await store.createCompany('Demo Company')
  const agent = (await store.createAgent(company.id, 'Demo Agent', true))!
  const { keyId, keySecret, secretHash } = generateApiKey()
  await store.createApiKey(company.id, keyId, secretHash, 'demo key')
  return { companyId: company.id, agentId: agent.id, keyId, keySecret }
}

export function demoBanner(demo: DemoData, baseUrl: string): string {
  const body = JSON.stringify({ keyId: demo.keyId, keySecret: demo.keySecret, userId: 'user-42' })
  return [
    '',
    'Demo data created on this empty store (shown once):',
    `  company    ${demo.companyId}`,
    `  agent      ${demo.agentId}  (the company's default agent)`,
    `  keyId      ${demo.keyId}`,
    `  keySecret  ${demo.keySecret}`,
    '',
    'Get a token for your end user "user-42":',
    `  curl -s -X POST ${baseUrl}/rest/v1/auth/token -H 'content-type: application/json' -d '${body}'`,
    'then verify it:',
    `  curl -i ${baseUrl}${VERIFY_PATH} -H "authorization: Bearer <token>"`,
    '',
  ].join('\n')
}
