/**
 * Every failure of a client call, as one typed object: the gateway's error body
 * (`statusCode`, `code`, `message`) when it answered, or a client-side `code` when it did not.
 */
export class ChatAuthError extends Error {
  override readonly name = 'ChatAuthError'

  constructor(
    /** the HTTP status; 0 when no answer arrived (network error, timeout) */
    readonly statusCode: number,
    /** the gateway's machine code (`TOKEN_REVOKED`, `INVALID_API_CREDENTIALS`, …) or one of {@link CLIENT_CODES} */
    readonly code: string,
    message: string,
    options: {
      /** seconds the gateway asked to wait (429, 503) */
      retryAfter?: number | undefined
      cause?: unknown
    } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.retryAfter = options.retryAfter
  }

  readonly retryAfter: number | undefined

  /** The error body, as the gateway writes it. */
  toJSON(): { statusCode: number; code: string; message: string } {
    return { statusCode: this.statusCode, code: this.code, message: this.message }
  }
}

/** Codes of failures the client itself reports. */
export const CLIENT_CODES = {
  /** no answer: the connection failed or was cut (statusCode 0) */
  NETWORK_ERROR: 'NETWORK_ERROR',
  /** no answer within the timeout (statusCode 0) */
  TIMEOUT: 'TIMEOUT',
  /** the call was aborted through the caller's signal (statusCode 0) */
  ABORTED: 'ABORTED',
  /** an answer that is not the gateway's JSON (a proxy's error page, say) */
  UNEXPECTED_RESPONSE: 'UNEXPECTED_RESPONSE',
} as const
