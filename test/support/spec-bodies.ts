import { errorBody } from './helpers.js'

/**
 * The error bodies the API reference (docs/api.md) fixes, written out once for every black-box test. Deliberately
 * not imported from src/errors.ts: the tests hold the service to the contract, not to itself.
 */
export const INVALID_API_CREDENTIALS = errorBody(401, 'Invalid API credentials', 'INVALID_API_CREDENTIALS')
export const INVALID_ADMIN_TOKEN = errorBody(401, 'Invalid admin token', 'INVALID_ADMIN_TOKEN')
export const CUSTOMER_USER_NOT_FOUND = errorBody(400, 'Customer user not found or does not belong to your company', 'CUSTOMER_USER_NOT_FOUND')

// Verification denials (SPEC §3.3), in check order.
export const MISSING_BEARER_TOKEN = errorBody(401, 'Missing bearer token', 'MISSING_BEARER_TOKEN')
export const INVALID_TOKEN = errorBody(401, 'Invalid token', 'INVALID_TOKEN')
export const TOKEN_EXPIRED = errorBody(401, 'Token has expired', 'TOKEN_EXPIRED')
export const USER_NOT_FOUND_OR_INACTIVE = errorBody(401, 'Customer user not found or inactive', 'CUSTOMER_USER_NOT_FOUND_OR_INACTIVE')
export const TOKEN_REVOKED = errorBody(401, 'Token has been revoked', 'TOKEN_REVOKED')
export const TOKEN_COMPANY_MISMATCH = errorBody(401, 'Token company mismatch', 'TOKEN_COMPANY_MISMATCH')
export const AGENT_INACTIVE = errorBody(401, 'Agent is inactive', 'AGENT_INACTIVE')
