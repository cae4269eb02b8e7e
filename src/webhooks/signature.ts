import { createHmac, randomBytes } from 'node:crypto'

/**
 * Signing per the Standard Webhooks specification (https://www.standardwebhooks.com): the
 * secret is `whsec_` + base64 of the key; the signature is base64 HMAC-SHA256 of
 * `<webhook-id>.<webhook-timestamp>.<body>`, sent as `v1,<signature>`. node:crypto rather
 * than the `standardwebhooks` package: its HMAC is native, the package's pure JavaScript;
 * the tests verify what this signs with the package.
 */
const PREFIX = 'whsec_'
const KEY_BYTES = 32

/** A new endpoint's secret: 32 random bytes. */
export const generateWebhookSecret = (): string => PREFIX + randomBytes(KEY_BYTES).toString('base64')

/** The three headers of one attempt. `timestamp` in seconds since the epoch. */
export function signatureHeaders(secret: string, messageId: string, timestamp: number, body: string): Record<string, string> {
  const key = Buffer.from(secret.slice(PREFIX.length), 'base64')
  const signature = createHmac('sha256', key).update(`${messageId}.${timestamp}.${body}`).digest('base64')
  return { 'webhook-id': messageId, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` }
}
