import { isIP } from 'node:net'
import { resolve } from 'node:path'
import { ConfigError, type SentinelAddress } from './types.js'

/** What the declaration says of one variable, besides the kind of its value. */
export interface About<D extends string | undefined> {
  /** what it means, in one line (the CLI's --help) */
  help: string
  /** the value when unset, written as a person would set it, and parsed like one */
  default?: D
  /** what happens when it is unset and there is no default value ("generated") */
  unset?: string
  /**
   * A blank value (`NAME=` in an env file, an unset shell variable expanded) is refused
   * instead of counting as unset: where unset makes the node generate a secret of its own,
   * blank is surely a mistake that would otherwise pass unnoticed.
   */
  blankRefused?: boolean
}

/** One declared variable: what it means, its default, and how its text becomes a checked value. */
export interface Variable<T, D extends string | undefined = string | undefined> {
  readonly help: string
  readonly default: D
  readonly unset: string | undefined
  readonly blankRefused: boolean
  /** the values it accepts, when a few words say it (`0..65535`, `true|false`) */
  readonly accepts: string | undefined
  /** the checked value, or a ConfigError naming `name` and what was expected */
  readonly parse: (text: string, name: string) => T
}

function variable<T, D extends string | undefined>(about: About<D>, parse: (text: string, name: string) => T, accepts?: string): Variable<T, D> {
  return { help: about.help, default: about.default as D, unset: about.unset, blankRefused: about.blankRefused ?? false, accepts, parse }
}

/** Any text; `minLength` counts bytes, as a secret's strength does. */
export function text<D extends string | undefined = undefined>(about: About<D>, minLength = 0): Variable<string, D> {
  return variable(about, (value, name) => {
    if (Buffer.byteLength(value) < minLength) throw new ConfigError(name, `must be at least ${minLength} characters`)
    return value
  }, minLength > 0 ? `at least ${minLength} characters` : undefined)
}

/** A whole number of `min..max`. */
export function integer<D extends string | undefined = undefined>(min: number, max: number, about: About<D>): Variable<number, D> {
  return variable(about, (value, name) => {
    if (!/^[0-9]+$/.test(value)) throw new ConfigError(name, `expected an integer, got "${value}"`)
    const number = Number(value)
    if (number < min || number > max) throw new ConfigError(name, `expected ${min}..${max}, got ${number}`)
    return number
  }, `${min}..${max}`)
}

export function boolean<D extends string | undefined = undefined>(about: About<D>): Variable<boolean, D> {
  return variable(about, (value, name) => {
    if (/^(1|true|yes|on)$/i.test(value)) return true
    if (/^(0|false|no|off)$/i.test(value)) return false
    throw new ConfigError(name, `expected true or false, got "${value}"`)
  }, 'true|false')
}

export function oneOf<T extends string, D extends string | undefined = undefined>(allowed: readonly T[], about: About<D>): Variable<T, D> {
  return variable(about, (value, name) => {
    if ((allowed as readonly string[]).includes(value)) return value as T
    throw new ConfigError(name, `expected one of ${allowed.join(', ')}, got "${value}"`)
  }, allowed.join('|'))
}

/** A URL of one of `protocols` (`postgres:`, …), kept as written. */
export function url<D extends string | undefined = undefined>(protocols: string[], about: About<D>): Variable<string, D> {
  return variable(about, (value, name) => {
    let parsed: URL
    try {
      parsed = new URL(value)
    } catch {
      throw new ConfigError(name, 'not a valid URL')
    }
    if (!protocols.includes(parsed.protocol)) {
      throw new ConfigError(name, `expected a ${protocols.join(' or ')}// URL, got ${parsed.protocol}//`)
    }
    return value
  })
}

/** A name on Redis: 1..`maxLength` letters, digits, `_ . : -`. */
export function redisName<D extends string | undefined = undefined>(maxLength: number, about: About<D>): Variable<string, D> {
  const pattern = new RegExp(`^[A-Za-z0-9_.:-]{1,${maxLength}}$`)
  return variable(about, (value, name) => {
    if (!pattern.test(value)) throw new ConfigError(name, `use 1..${maxLength} letters, digits, _ . : -`)
    return value
  }, `1..${maxLength} of A-Za-z0-9_.:-`)
}

/** A folder, made absolute; `memory://` stays as it is. */
export function folder<D extends string | undefined = undefined>(about: About<D>): Variable<string, D> {
  return variable(about, (value) => (value.startsWith('memory://') ? value : resolve(value)))
}

// No leading zero (one spelling per value); any number of digits: a long but well-formed
// value is over the caller's limit, which says more than "malformed" (callers bound the length).
const DURATION = /^([1-9][0-9]*)([mhd])$/
const UNIT_SECONDS = { m: 60, h: 3600, d: 86400 } as const

/** `<positive integer><m|h|d>` → seconds (possibly huge: compare with a limit), or undefined when malformed. */
export function parseDuration(value: string): number | undefined {
  const match = DURATION.exec(value)
  if (!match) return undefined
  return Number(match[1]) * UNIT_SECONDS[match[2] as keyof typeof UNIT_SECONDS]
}

/** A duration such as `30d`, in seconds, of at most `maxDays`. */
export function duration<D extends string | undefined = undefined>(maxDays: number, about: About<D>): Variable<number, D> {
  return variable(about, (value, name) => {
    const seconds = parseDuration(value)
    if (seconds === undefined) throw new ConfigError(name, `expected <positive integer><m|h|d> such as 30d, got "${value}"`)
    if (seconds > maxDays * 86400) throw new ConfigError(name, `at most ${maxDays}d (${maxDays / 365} years), got "${value}"`)
    return seconds
  }, `1m..${maxDays}d`)
}

const SPAN = /^([1-9][0-9]*)(ms|s|m)$/
const SPAN_UNIT_SECONDS = { ms: 0.001, s: 1, m: 60 } as const

/** A short span such as `1s` or `500ms` (`<positive integer><ms|s|m>`), in seconds (a fraction below 1 s), of at most `maxSeconds`. */
export function span<D extends string | undefined = undefined>(maxSeconds: number, about: About<D>): Variable<number, D> {
  return variable(about, (value, name) => {
    const match = SPAN.exec(value)
    if (!match) throw new ConfigError(name, `expected <positive integer><ms|s|m> such as 1s or 500ms, got "${value}"`)
    const seconds = Number(match[1]) * SPAN_UNIT_SECONDS[match[2] as keyof typeof SPAN_UNIT_SECONDS]
    if (seconds > maxSeconds) throw new ConfigError(name, `at most ${maxSeconds}s, got "${value}"`)
    return seconds
  }, `1ms..${maxSeconds}s`)
}

const PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal']

/** Comma-separated proxy addresses, CIDR ranges, or the names above. */
export function proxies<D extends string | undefined = undefined>(about: About<D>): Variable<string[], D> {
  return variable(about, (value, name) => {
    const entries = value.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
    for (const entry of entries) {
      if (PROXY_NAMES.includes(entry)) continue
      const [address, prefix, ...rest] = entry.split('/')
      const version = isIP(address!)
      const prefixOk = prefix === undefined || (/^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 6 ? 128 : 32))
      if (version === 0 || !prefixOk || rest.length > 0) {
        throw new ConfigError(name, `expected addresses, CIDR ranges or ${PROXY_NAMES.join('/')}, comma-separated; got "${entry}"`)
      }
    }
    return entries
  })
}

/** `true`, or comma-separated CIDR ranges (`10.0.0.0/8`, `fd00::/8`): each an address and its prefix length. */
export function networks<D extends string | undefined = undefined>(about: About<D>): Variable<true | string[], D> {
  return variable(about, (value, name) => {
    if (value === 'true') return true
    const entries = value.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '')
    for (const entry of entries) {
      const [address, prefix, ...rest] = entry.split('/')
      const version = isIP(address!)
      const prefixOk = prefix !== undefined && /^[0-9]{1,3}$/.test(prefix) && Number(prefix) <= (version === 6 ? 128 : 32)
      if (version === 0 || !prefixOk || rest.length > 0) throw new ConfigError(name, `expected true or CIDR ranges such as 10.0.0.0/8, comma-separated; got "${entry}"`)
    }
    if (entries.length === 0) throw new ConfigError(name, 'expected true or CIDR ranges such as 10.0.0.0/8, comma-separated')
    return entries
  }, 'true|CIDR,…')
}

/** `host:port,host:port,…`, each once; an IPv6 address in brackets (`[::1]:26379`). */
export function hostPorts<D extends string | undefined = undefined>(about: About<D>): Variable<SentinelAddress[], D> {
  return variable(about, (value, name) => {
    const addresses = value.split(',').map((entry) => {
      entry = entry.trim()
      const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):([0-9]{1,5})$/.exec(entry)
      const host = match?.[1] ?? match?.[2]
      const port = Number(match?.[3])
      if (!match || host === undefined || (match[1] !== undefined && isIP(host) !== 6) || port < 1 || port > 65535) {
        throw new ConfigError(name, `expected host:port entries, comma-separated (IPv6 as [::1]:26379); got "${entry}"`)
      }
      return { host, port }
    })
    const keys = addresses.map((a) => `${a.host}:${a.port}`)
    const repeated = keys.find((key, i) => keys.indexOf(key) !== i)
    if (repeated !== undefined) throw new ConfigError(name, `${repeated} is listed twice (each sentinel counts once towards a majority)`)
    return addresses
  })
}
