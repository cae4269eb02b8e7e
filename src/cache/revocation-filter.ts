/**
 * A Bloom filter over revoked jtis: a fixed number of bytes whatever number of tokens were
 * revoked, and no false negatives — a jti added is always "maybe held". A "maybe" is settled
 * by the store (revoked-tokens.ts); a "no" is final. The false-positive rate grows with what
 * was added: `falsePositiveRate()` estimates it, and the holder rebuilds the filter from the
 * store (dropping expired revocations) before it climbs.
 *
 * The jtis asked about come from tokens whose signature was checked, and we chose them
 * (random UUIDs): a fast non-cryptographic hash is enough, no one can aim at the bits.
 */
export interface RevocationFilter {
  add(jti: string): void
  /** The load's pages: many jtis at once. */
  addAll(jtis: readonly string[]): void
  /** false: never added. true: added, or a false positive. */
  mightHold(jti: string): boolean
  /** jtis added (repeats counted again) */
  readonly entries: number
  readonly bytes: number
  /** the chance that a jti never added is "maybe held", estimated from `entries` */
  falsePositiveRate(): number
}

/** bits probed per jti: near the optimum for 10 to 40 bits per entry, cheap to compute */
const PROBES = 8

export function createRevocationFilter(bytes: number): RevocationFilter {
  const words = new Uint32Array(Math.max(1, Math.floor(bytes / 4)))
  const bits = words.length * 32
  let entries = 0

  // Double hashing (Kirsch–Mitzenmacher): probe i is h1 + i·h2, from two 32-bit hashes.
  let h1 = 0
  let h2 = 0
  function hash(jti: string): void {
    let a = 0x811c9dc5
    let b = 0x9747b28c
    for (let i = 0; i < jti.length; i++) {
      const c = jti.charCodeAt(i)
      a = Math.imul(a ^ c, 0x01000193)
      b = Math.imul(b ^ c, 0x5bd1e995)
      b ^= b >>> 15
    }
    h1 = mix(a)
    h2 = mix(b) | 1
  }

  function add(jti: string): void {
    hash(jti)
    for (let i = 0; i < PROBES; i++) {
      const bit = ((h1 + Math.imul(i, h2)) >>> 0) % bits
      words[bit >>> 5]! |= 1 << (bit & 31)
    }
    entries++
  }

  return {
    add,
    addAll(jtis) {
      for (const jti of jtis) add(jti)
    },
    mightHold(jti) {
      hash(jti)
      for (let i = 0; i < PROBES; i++) {
        const bit = ((h1 + Math.imul(i, h2)) >>> 0) % bits
        if ((words[bit >>> 5]! & (1 << (bit & 31))) === 0) return false
      }
      return true
    },
    get entries() {
      return entries
    },
    bytes: words.byteLength,
    falsePositiveRate: () => (1 - Math.exp((-PROBES * entries) / bits)) ** PROBES,
  }
}

/** murmur3's finaliser: every input bit reaches every output bit */
function mix(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}
