/** The content type of every JSON answer, as Fastify writes it for an object. */
export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

/**
 * A string as JSON text, the very characters `JSON.stringify` writes for it. Most strings an
 * answer carries (ids, names, external ids) are printable ASCII with no quote and no
 * backslash: those are quoted as they are after one scan, where `JSON.stringify` and
 * fast-json-stringify's general path cost several times that; any other string is left to
 * `JSON.stringify`, which escapes it.
 */
export function jsonString(value: string): string {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (code < 0x20 || code > 0x7e || code === 0x22 || code === 0x5c) return JSON.stringify(value)
  }
  return '"' + value + '"'
}
