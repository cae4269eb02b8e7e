/** The admin token and HS256 secret every test node runs with, unless a test sets its own. */
export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef'
export const JWT_SECRET = 'test-jwt-secret-that-is-at-least-32-bytes-long!'
