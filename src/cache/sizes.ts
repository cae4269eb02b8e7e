import type { AgentState, ApiKeyState, CompanyState, UserState } from '../domain.js'

/**
 * Estimates of the heap a cache entry holds, for the caches' byte budgets (CACHE_MAX_BYTES).
 * They run on every fill, so they only add string lengths to a fixed overhead per entry;
 * the constants are calibrated against the heap measured by bench/memory.ts (bench/RESULTS.md).
 *
 * V8 stores a string with one byte per character when every character is Latin-1 and two
 * otherwise (UTF-16), after a header of 16 bytes; objects are rounded to 8 bytes.
 */
const STRING_HEADER = 16
const NON_LATIN1 = /[^\u0000-\u00ff]/

export function stringBytes(value: string): number {
  return STRING_HEADER + ((value.length * (NON_LATIN1.test(value) ? 2 : 1) + 7) & ~7)
}

/**
 * A cached user (states.ts): its two-field object (the profile it shares with many is not
 * counted), the LRU's map entry and its two slots, and room for the map's churn.
 */
export const USER_ENTRY_OVERHEAD = 128
/** A cached user: its id is the key's own string, its external id is its own. */
export const userBytes = (key: string, user: Pick<UserState, 'externalId'>): number => USER_ENTRY_OVERHEAD + stringBytes(key) + stringBytes(user.externalId)

/**
 * An index entry: the map entry, and a slot in each of the five arrays lru-cache grows as
 * the index fills (up to half again as many slots as entries while it grows).
 */
export const USER_ID_ENTRY_OVERHEAD = 136
/** (company + NUL + external id) → user id. */
export const userIdBytes = (key: string, userId: string): number => USER_ID_ENTRY_OVERHEAD + stringBytes(key) + stringBytes(userId)

/** An agent, company or API key: a state object of its own, the map entry and slots. */
export const STATE_ENTRY_OVERHEAD = 160
/** Agents, companies and API keys are few next to users: every string counted. */
export const agentBytes = (key: string, agent: AgentState): number => STATE_ENTRY_OVERHEAD + stringBytes(key) + stringBytes(agent.name)
export const companyBytes = (key: string, _company: CompanyState): number => STATE_ENTRY_OVERHEAD + stringBytes(key)
export const apiKeyBytes = (key: string, apiKey: ApiKeyState): number => STATE_ENTRY_OVERHEAD + stringBytes(key) + apiKey.secretHash.length + 96
