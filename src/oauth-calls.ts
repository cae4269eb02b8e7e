import { UsageError } from './admin-calls.js'

/**
 * The CLI's `oauth` subcommands (SPEC §9): each one call of the typed client's `oauth`
 * calls, with the company's API key (`CHAT_AUTH_KEY_ID` or `--key-id`, and
 * `CHAT_AUTH_KEY_SECRET`) as client credentials. The token is an argument, or `-` to read
 * it from stdin, which keeps it out of the process list and the shell's history.
 */
export type OAuthCall = { call: 'introspect' | 'revoke'; token: string }

const ACTIONS: Record<string, { usage: string }> = {
  introspect: { usage: 'TOKEN|-   (RFC 7662: {"active": true, …} or {"active": false}; - reads the token from stdin)' },
  revoke: { usage: 'TOKEN|-   (RFC 7009: prints nothing; also for a malformed, unknown or expired token)' },
}

export function oauthUsage(): string {
  return Object.entries(ACTIONS).map(([action, { usage }]) => `  chat-auth oauth ${action} ${usage}`).join('\n') + '\n'
}

/** Maps `oauth <action> <token>` to the call; `stdin` is read only for `-`. */
export async function oauthCall(action: string, token: string | undefined, stdin: () => Promise<string>): Promise<OAuthCall> {
  if (!action) throw new UsageError(`oauth needs an action: ${Object.keys(ACTIONS).join(', ')}`, 'oauth')
  if (action !== 'introspect' && action !== 'revoke') throw new UsageError(`oauth has no action "${action}"`, 'oauth')
  if (!token) throw new UsageError(`oauth ${action} needs a token (or - to read it from stdin)`, 'oauth')
  const read = token === '-' ? (await stdin()).trim() : token
  if (!read) throw new UsageError('no token on stdin', 'oauth')
  return { call: action, token: read }
}

/** The API key the oauth calls authenticate with, or a usage error saying what to set. */
export function oauthKey(keyId: string | undefined, keySecret: string | undefined): { keyId: string; keySecret: string } {
  if (!keyId) throw new UsageError('set CHAT_AUTH_KEY_ID or pass --key-id (the API key of the company)', 'oauth')
  if (!keySecret) throw new UsageError('set CHAT_AUTH_KEY_SECRET (the secret of that key; never a flag, which other users could see)', 'oauth')
  return { keyId, keySecret }
}
