import { jsonString } from '../json-text.js'
import type { SignedClaims } from './keyring.js'

/**
 * A token's claims as JSON text, written out: exactly what `JSON.stringify` writes for a
 * SignedClaims object whose keys were set in the interface's order, as the token issuer sets
 * them (test/unit/claims-json.test.ts holds the two equal). It saves `JSON.stringify`'s
 * general walk over the object, a twentieth of a token request's instructions.
 * Numbers are integers (seconds, versions, generations): `String` writes them as JSON does.
 * The ids are UUIDs, read from the store's uuid columns or made by randomUUID: hex digits and
 * hyphens, written as they are; only iss and aud, the operator's strings, are escaped.
 */
export function claimsJson(claims: SignedClaims): string {
  const { sub, tokenVersion, companyId, agentId, iat, exp, jti, cgen, agen, iss, aud } = claims
  let text = `{"sub":"${sub}","tokenVersion":${tokenVersion},"companyId":"${companyId}","agentId":"${agentId}","iat":${iat},"exp":${exp},"jti":"${jti}"`
  if (cgen !== undefined) text += `,"cgen":${cgen}`
  if (agen !== undefined) text += `,"agen":${agen}`
  if (iss !== undefined) text += `,"iss":${jsonString(iss)}`
  if (aud !== undefined) text += `,"aud":${jsonString(aud)}`
  return text + '}'
}
