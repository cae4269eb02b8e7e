/**
 * SPEC §3.3: the verify endpoint's path, written here only (test/unit/architecture.test.ts):
 * the route, the answers to what never reaches it (refused.ts), the demo's example and the
 * bench take it from here.
 */
export const VERIFY_PATH = '/rest/v1/auth/verify'

/** A request target for the verify endpoint: its path, or one below it (`/…`, `;…`), with or without a query. */
export function isVerifyTarget(target: string): boolean {
  if (!target.startsWith(VERIFY_PATH)) return false
  const next = target.charAt(VERIFY_PATH.length)
  return next === '' || next === '/' || next === ';' || next === '?' || next === '#'
}

/** A URL below the endpoint (`/…/verify/anything`, `/…/verify;matrix=params`), which the route answers alike. */
export function isBelowVerifyPath(url: string): boolean {
  return url.startsWith(VERIFY_PATH + '/') || url.startsWith(VERIFY_PATH + ';')
}
