import { denials, type Denial } from '../errors.js'
import type { AgentState, CompanyState, UserState } from '../domain.js'
import type { Session } from './session.js'

/**
 * Rows read again for a session. `undefined`: not read again (unchanged since the session
 * was accepted, so it passed); `null`: read, and no such row.
 */
export interface Rows {
  user?: UserState | null
  jtiRevoked?: boolean
  company?: CompanyState | null
  agent?: AgentState | null
}

/**
 * The checks 3–6 of SPEC §3.3 (auth/verify.ts), in the same order and with the same
 * denials, for a session whose token passed them all when it was opened: only the rows
 * read again can fail now. The token's company is the user's (check 5 passed), so the
 * generations compare within it as verify compares them.
 */
export function denialOf(session: Session, rows: Rows): Denial | undefined {
  const companyId = session.companyId
  const { user, company, agent } = rows
  // 3. customer user exists and is active
  if (user === null || (user !== undefined && !user.active)) return denials.userNotFoundOrInactive
  // 4. tokenVersion current, the jti not revoked, the company's and agent's generations not past the token's
  if (user !== undefined && user.tokenVersion !== session.tokenVersion) return denials.revoked
  if (rows.jtiRevoked === true) return denials.revoked
  const sameCompany = user === undefined || user.companyId === companyId
  if (sameCompany && company != null && session.companyGeneration < company.tokensGeneration) return denials.revoked
  if (sameCompany && agent != null && agent.companyId === companyId && session.agentGeneration < agent.tokensGeneration) return denials.revoked
  // 5. the user's company is the token's company
  if (!sameCompany) return denials.companyMismatch
  // 6. the token's agent exists, belongs to that company, and is active
  if (agent === null || (agent !== undefined && (agent.companyId !== companyId || !agent.active))) return denials.agentInactive
  return undefined
}
