/** Which back end this run of the suite uses: `npm test` runs it once for each. */
export const STORE: 'pglite' | 'postgres' = process.env.TEST_STORE === 'postgres' ? 'postgres' : 'pglite'

/** The admin token and HS256 secret every test node runs with, unless a test sets its own. */
export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef'
export const JWT_SECRET = 'test-jwt-secret-that-is-at-least-32-bytes-long!'

/**
 * The caches' capacity of a test's node (unless its env says otherwise). lru-cache
 * allocates its whole capacity when it is made: at the default of 1,000,000 users that is
 * ~60 MB and ~0.25 s of CPU for every node a test starts, for entries no test fills.
 */
export const TEST_CACHE_SIZE = '10000'

/**
 * TEST_NODE_INTERNALS=false in the test run's environment: every node a test starts (in
 * process, or as a process) takes Node's public API instead of its internals
 * (src/http/node-internals.ts), so that any test file can be run both ways.
 */
export const NODE_INTERNALS_ENV: Record<string, string> = process.env.TEST_NODE_INTERNALS === undefined ? {} : { TEST_NODE_INTERNALS: process.env.TEST_NODE_INTERNALS }
