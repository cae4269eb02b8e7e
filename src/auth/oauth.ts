import { ApiError, oauthErrors } from '../errors.js'
import type { TokenRevoker } from './revoke-token.js'
import type { VerifyToken } from './verify.js'

/** The key that asked: the company whose tokens it may look at, and its id (`client_id`). */
export interface OAuthClient {
  companyId: string
  keyId: string
}

/** RFC 7662 §2.2 (SPEC §9.1): an active token's fields, or `{active: false}` and nothing more. */
export type Introspection =
  | {
      active: true
      sub: string
      exp: number
      iat?: number
      jti?: string
      token_type: 'Bearer'
      client_id: string
      iss?: string
      aud?: string | string[]
      company_id: string
      agent_id: string
      token_version: number
      ext_id: string
    }
  | { active: false }

/**
 * SPEC §9: the two OAuth endpoints over the checks the rest of the gateway already makes,
 * with no HTTP here. Introspection is the verify endpoint's verdict (auth/verify.ts: every
 * check of §3.3, every revocation scope of §7.1) narrowed to the asking key's company;
 * revocation is §7.1 revoke-token (auth/revoke-token.ts, with its guarantee) with RFC 7009's
 * answers for what is not a token of that company.
 */
export interface OAuthService {
  /** Rejects only when it cannot decide (a store is down): never an `active: true` then. */
  introspect(client: OAuthClient, token: string): Promise<Introspection>
  /**
   * Resolves once every node refuses the token, or at once for a token that is none of ours
   * (malformed, unknown, expired: RFC 7009 §2.2). Rejects with `unauthorized_client` for a
   * valid token of another company, and nothing is written.
   */
  revoke(client: OAuthClient, token: string): Promise<void>
}

export interface OAuthServiceOptions {
  verifyToken: VerifyToken
  revoker: TokenRevoker
}

const INACTIVE: Introspection = Object.freeze({ active: false })

export function createOAuthService({ verifyToken, revoker }: OAuthServiceOptions): OAuthService {
  return {
    async introspect(client, token) {
      const verdict = await verifyToken(token)
      // Another company's token is inactive to this key: it learns nothing of it (RFC 7662 §2.2).
      if (!verdict.ok || verdict.identity.user.companyId !== client.companyId) return INACTIVE
      const { identity } = verdict
      const claims = verdict.claims as unknown as Record<string, unknown>
      return {
        active: true,
        sub: identity.user.id,
        exp: identity.exp,
        ...numeric('iat', claims.iat),
        ...(typeof claims.jti === 'string' ? { jti: claims.jti } : {}),
        token_type: 'Bearer',
        client_id: client.keyId,
        ...(typeof claims.iss === 'string' ? { iss: claims.iss } : {}),
        ...(audience(claims.aud) === undefined ? {} : { aud: audience(claims.aud)! }),
        company_id: identity.user.companyId,
        agent_id: identity.agent.id,
        token_version: identity.tokenVersion,
        ext_id: identity.user.externalId,
      }
    },

    async revoke(client, token) {
      try {
        await revoker.revoke(client, token)
      } catch (error) {
        if (!(error instanceof ApiError) || error.code !== 'TOKEN_NOT_FOUND') throw error
        // Not a token this key may revoke. A valid one of another company (it passes every
        // check of verification) is refused (SPEC §9.2); anything else, another company's
        // expired or revoked token included, is no valid token at all: RFC 7009 §2.2's 200.
        const verdict = await verifyToken(token)
        if (verdict.ok && verdict.identity.user.companyId !== client.companyId) throw oauthErrors.unauthorizedClient()
      }
    },
  }
}

const numeric = (name: 'iat', value: unknown) => (Number.isSafeInteger(value) ? { [name]: value as number } : {})

function audience(value: unknown): string | string[] | undefined {
  if (typeof value === 'string') return value
  if (Array.isArray(value) && value.every((entry) => typeof entry === 'string')) return value as string[]
  return undefined
}
