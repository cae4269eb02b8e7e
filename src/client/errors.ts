/**
 * Every failure of a client call, as one typed object: the gateway's error body
 * (`statusCode`, `code`, `message`) when it answered, or a client-side `code` when it did not.
 *
 * Whose fault it is shows in the code. A call whose arguments cannot be sent (a token with a
 * line break or a character above U+00FF, an id that is not well-formed text, a body JSON
 * cannot hold) rejects with `INVALID_ARGUMENT` before any request, and is never retried: an
 * end user's bad token is not "the gateway is down". A wrong client option is the program's
 * mistake, not a call's: `new ChatAuthClient(…)` throws a `TypeError` naming the option
 * (`client option timeoutMs: …`), and so does a call that needs an option the client was
 * made without (`apiKey`, `adminToken`).
 */
export class ChatAuthError extends Error {
  override readonly name = 'ChatAuthError'

  constructor(
    /** the HTTP status of the answer, whatever its body says; 0 when none arrived (network error, timeout) or none was sent (bad argument) */
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
  /** an answer that is not the gateway's JSON (a proxy's error page, say), or an error body whose statusCode is not the answer's status */
  UNEXPECTED_RESPONSE: 'UNEXPECTED_RESPONSE',
  /** a success that is not the answer the call promises (verify: anything but a 200 with the identity); never read as "allow", never retried */
  PROTOCOL_ERROR: 'PROTOCOL_ERROR',
  /** the call's arguments cannot be sent (statusCode 0): nothing was sent, nothing is retried */
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  /**
   * a 3xx answer (its status; 0 for a browser's opaque redirect), never followed: the gateway
   * sends none, and following it would send the call, credentials and all, elsewhere. The
   * message names its Location. Never retried.
   */
  REDIRECT_REFUSED: 'REDIRECT_REFUSED',
  /** an answer whose body is longer than the client option maxResponseBytes (its status): not read past it, never retried */
  RESPONSE_TOO_LARGE: 'RESPONSE_TOO_LARGE',
} as const
