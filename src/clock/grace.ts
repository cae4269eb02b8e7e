import type { Config } from '../config.js'

/**
 * How long past a token's `exp` its revocation must be kept: until no clock that may still
 * accept the token does. A node accepts a token until exp + JWT_CLOCK_TOLERANCE by its own
 * clock, and a node's clock is off PostgreSQL's by at most MAX_CLOCK_SKEW (the bound each
 * node checks, clock/offset.ts): so by PostgreSQL's clock, or by any node's, the token is
 * refused everywhere once exp + JWT_CLOCK_TOLERANCE + MAX_CLOCK_SKEW has passed. Every place
 * that drops a revocation — the store's prune, the write that finds nothing left to keep,
 * the load a node's filter is (re)built from — drops it only then.
 */
export function revocationGraceSeconds(config: Pick<Config, 'jwt' | 'maxClockSkewSeconds'>): number {
  return config.jwt.clockToleranceSeconds + config.maxClockSkewSeconds
}
