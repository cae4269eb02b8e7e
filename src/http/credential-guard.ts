import type { FastifyRequest } from 'fastify'
import type { AuthenticateApiKey } from '../auth/credentials.js'
import { bearerToken } from '../auth/verify.js'
import type { ApiKeyState, Caller } from '../domain.js'
import type { AdminCallerOf } from '../auth/operators.js'
import { andThen, type MaybePromise } from '../maybe-promise.js'
import { ApiError, errors } from '../errors.js'
import type { FailureLimits } from './failure-limits.js'

/**
 * SPEC §7.3: every endpoint that takes credentials checks them through here. Past the limit
 * of failures from one client address (or against one keyId) every further attempt answers
 * 429 *before* the credentials are looked at — a blocked caller cannot tell a right guess
 * from a wrong one — until the window ends. Successful calls are never counted.
 */
export interface CredentialGuard {
  /**
   * the API key a (keyId, secret) pair names, or the SPEC's 401 / 429 (a rejected promise);
   * a value when nothing needed waiting for (a cached key, no failure limit to consult)
   */
  apiKey(request: FastifyRequest, keyId: string, keySecret: string): MaybePromise<ApiKeyState>
  /**
   * the caller its `Authorization: Bearer` names (ADMIN_TOKEN or a live operator's token,
   * SPEC §10.1); else the SPEC's 401 / 429
   */
  admin(request: FastifyRequest): Promise<Caller>
  /** the same for a token presented otherwise (the console's sign-in, SPEC §10.3) */
  adminToken(request: FastifyRequest, token: string): Promise<Caller>
}

export interface CredentialGuardOptions {
  authenticateApiKey: AuthenticateApiKey
  /** the caller a bearer token of the admin API names (auth/operators.ts) */
  adminCallerOf: AdminCallerOf
  /** undefined: no limit (AUTH_FAILURE_LIMIT=0) */
  failures: FailureLimits | undefined
}

// The keyId each request presented, however it carried it: the failure log names it (SPEC §7.3).
const presentedKeyIds = new WeakMap<FastifyRequest, string>()

/** The keyId the request presented to the guard, if any (at most 128 characters: it is logged). */
export function presentedKeyId(request: FastifyRequest): string | undefined {
  return presentedKeyIds.get(request)
}

export function createCredentialGuard({ authenticateApiKey, adminCallerOf, failures }: CredentialGuardOptions): CredentialGuard {
  /**
   * Resolves (or, when the limits answer at once and nothing is blocked, returns) when the
   * request may present credentials; rejects with the SPEC's 429 otherwise.
   */
  function admit(request: FastifyRequest, keyId?: string): MaybePromise<void> {
    if (failures === undefined) return
    return andThen(failures.blockedFor(request, keyId), (waitMs) => (waitMs > 0 ? Promise.reject(errors.rateLimited(Math.ceil(waitMs / 1000))) : undefined))
  }

  async function failed(request: FastifyRequest, keyId?: string): Promise<void> {
    await failures?.recordFailure(request, keyId)
  }

  /** A refused key counts as a failure (SPEC §7.3) before its 401 is passed on. */
  async function refusedKey(request: FastifyRequest, keyId: string, error: unknown): Promise<never> {
    if (error instanceof ApiError && error.statusCode === 401) await failed(request, keyId)
    throw error
  }

  async function adminCaller(request: FastifyRequest, token: string | undefined): Promise<Caller> {
    await admit(request)
    const caller = token === undefined ? undefined : await adminCallerOf(token)
    if (caller === undefined) {
      await failed(request)
      throw errors.invalidAdminToken()
    }
    return caller
  }

  return {
    apiKey(request, keyId, keySecret) {
      presentedKeyIds.set(request, keyId.slice(0, 128))
      return andThen(admit(request, keyId), () => {
        const key = authenticateApiKey(keyId, keySecret)
        return key instanceof Promise ? key.catch((error: unknown) => refusedKey(request, keyId, error)) : key
      })
    },
    admin(request) {
      return adminCaller(request, bearerToken(request.headers.authorization))
    },
    adminToken(request, token) {
      return adminCaller(request, token)
    },
  }
}
