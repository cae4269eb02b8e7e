import { isCanonicalUuid } from '../domain.js'

/**
 * A session's jti as the session keeps it. Every token this gateway signs has a canonical
 * UUID for jti, and once the keyring's token cache forgot the token the session alone holds
 * its string (56 bytes, also the key of its entry in the jti index). Kept instead as four
 * 32-bit integers (small integers: four fields of the session, no object of their own), the
 * first of them the index's key, the jti costs 24 bytes where it cost 56. Any other jti is
 * kept as is, and is its own key.
 */
export type JtiWords = readonly [first: number | string | undefined, second: number, third: number, fourth: number]

const NO_WORDS: JtiWords = [undefined, 0, 0, 0]

/** xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx: the 32 hex digits, 8 at a time */
const WORD_DIGITS = [
  [0, 8],
  [9, 13, 14, 18],
  [19, 23, 24, 28],
  [28, 36],
] as const

// `| 0`: a signed 32-bit integer, which V8 keeps in the field itself (an unsigned one above 2^31 would be boxed)
const word = (jti: string, [from, to, from2, to2]: readonly number[]) => parseInt(jti.slice(from, to) + (from2 === undefined ? '' : jti.slice(from2, to2)), 16) | 0

export function jtiWords(jti: string | undefined): JtiWords {
  if (jti === undefined) return NO_WORDS
  if (!isCanonicalUuid(jti)) return [jti, 0, 0, 0]
  return [word(jti, WORD_DIGITS[0]), word(jti, WORD_DIGITS[1]), word(jti, WORD_DIGITS[2]), word(jti, WORD_DIGITS[3])]
}

/** The key of the index's entry for a jti: the session's first word (two UUIDs may share it: their sessions are told apart by the whole jti). */
export const jtiKey = (jti: string): number | string => (isCanonicalUuid(jti) ? word(jti, WORD_DIGITS[0]) : jti)

const hex8 = (word: number) => (word >>> 0).toString(16).padStart(8, '0')

/** The jti again, from its words. */
export function jtiOf(first: number | string | undefined, second: number, third: number, fourth: number): string | undefined {
  if (typeof first !== 'number') return first
  const [a, b, c, d] = [hex8(first), hex8(second), hex8(third), hex8(fourth)]
  return `${a}-${b.slice(0, 4)}-${b.slice(4)}-${c.slice(0, 4)}-${c.slice(4)}${d}`
}
