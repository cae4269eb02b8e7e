import { randomBytes } from 'node:crypto'

/** The secret the event cursors (the listing's and the stream's) are MACed with, kept in the store. */
export const CURSOR_SECRET_NAME = 'event-cursor-hmac'

/** Read on first use, not at registration (a node boots while its store is away); a failed read is tried again next time. */
export function cursorSecretOf(store: { getOrCreateSecret(name: string, candidate: string): Promise<string> }): () => Promise<Buffer> {
  let secret: Promise<Buffer> | undefined
  return () => {
    secret ??= store.getOrCreateSecret(CURSOR_SECRET_NAME, randomBytes(32).toString('base64url')).then(
      (value) => Buffer.from(value, 'base64url'),
      (error: unknown) => {
        secret = undefined
        throw error
      },
    )
    return secret
  }
}
