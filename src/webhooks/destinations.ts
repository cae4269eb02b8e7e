import { promises as dns, type LookupAddress, type LookupOptions } from 'node:dns'
import { isIP, type LookupFunction } from 'node:net'
import ipaddr from 'ipaddr.js'

/**
 * Where webhooks may be sent (SPEC §9.3): by default only public unicast addresses, so that
 * an admin cannot turn the sender into a client of the node's own network (its metadata
 * service, its databases, a port scan of it through the deliveries listing). ipaddr.js
 * knows the address classes (IANA's special-purpose registries) and reads every spelling a
 * resolver may hand back; the URL parser has already made `2130706433`, `0x7f000001`,
 * `0177.0.0.1` and `127.1` into `127.0.0.1`.
 *
 * Checked twice: at creation, on the URL (its literal address, the names that can only mean
 * a private network, what the name resolves to now), and at each attempt on the addresses
 * the connection is made to: `lookup` resolves once, refuses the whole answer when any
 * address in it is refused, and hands net.connect only the addresses it checked, so that a
 * name that resolves elsewhere a second time (DNS rebinding) changes nothing.
 */

/** WEBHOOK_ALLOW_PRIVATE_NETWORKS: `true` (every address), CIDR ranges, or unset (none). */
export type PrivateNetworks = true | readonly string[] | undefined

export type Resolve = (host: string) => Promise<LookupAddress[]>

export interface Destinations {
  /** Why `url` may not be a webhook's destination (a sentence for the 400), or undefined. */
  refusal(url: URL): Promise<string | undefined>
  /** Why a literal address may not be connected to, or undefined. */
  addressRefusal(address: string): string | undefined
  /** net.connect's `lookup`: resolves once, fails with DestinationRefused if any address is refused. */
  readonly lookup: LookupFunction
}

/** The attempt was not made: the destination is not allowed. `reason` says why. */
export class DestinationRefused extends Error {
  constructor(readonly reason: string) {
    super(`destination refused: ${reason}`)
  }
}

const CLASS_NAMES: Record<string, string> = {
  loopback: 'loopback',
  private: 'private',
  linkLocal: 'link-local',
  uniqueLocal: 'unique-local',
  carrierGradeNat: 'carrier-grade NAT',
  multicast: 'multicast',
  unspecified: 'unspecified',
  broadcast: 'broadcast',
}

// RFC 6761 (localhost), RFC 6762 (.local), RFC 8375 (home.arpa), ICANN's .internal, and the
// names ICANN will never delegate because private networks use them (lan, home, corp).
const LOOPBACK_NAME = /(^|\.)localhost$/
const PRIVATE_NAME = /(^[^.]+$)|\.(local|internal|home\.arpa|localdomain|lan|home|corp)$/
// A resolver that does not answer at creation does not hold the admin call: the send checks again.
const CREATION_LOOKUP_MS = 2000

const systemResolve: Resolve = (host) => dns.lookup(host, { all: true, verbatim: true })

export function destinationPolicy(allowed: PrivateNetworks, options: { resolve?: Resolve } = {}): Destinations {
  const resolve = options.resolve ?? systemResolve
  const ranges = allowed === true || allowed === undefined ? [] : allowed.map((cidr) => ipaddr.parseCIDR(cidr))
  const inRanges = (address: ipaddr.IPv4 | ipaddr.IPv6) => ranges.some(([network, bits]) => network.kind() === address.kind() && address.match(network, bits))

  /** "a loopback address", or undefined when `text` may be sent to. */
  function classOf(text: string): string | undefined {
    if (allowed === true) return undefined
    const address = ipaddr.parse(text)
    const mapped = address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress()
    const effective = mapped ? (address as ipaddr.IPv6).toIPv4Address() : address
    if (effective.range() === 'unicast' || inRanges(effective) || inRanges(address)) return undefined
    const name = CLASS_NAMES[effective.range()] ?? 'special-purpose'
    if (mapped) return `an IPv4-mapped ${name} address (${effective.toString()})`
    return `${name === 'unspecified' ? 'an' : 'a'} ${name} address`
  }

  function firstRefused(host: string, addresses: LookupAddress[]): string | undefined {
    for (const { address } of addresses) {
      const refused = classOf(address)
      if (refused !== undefined) return `${host} resolves to ${address}, ${refused}`
    }
    return undefined
  }

  const addressRefusal = (address: string): string | undefined => {
    const refused = classOf(address)
    return refused === undefined ? undefined : `${address} is ${refused}`
  }

  return {
    addressRefusal,

    async refusal(url) {
      const host = hostOf(url)
      if (isIP(host) !== 0) return addressRefusal(host)
      if (allowed === true) return undefined
      // With ranges allowed, an internal name is judged by what it resolves to.
      if (ranges.length === 0) {
        const bare = host.replace(/\.$/, '')
        if (LOOPBACK_NAME.test(bare)) return `${host} is a loopback name`
        if (PRIVATE_NAME.test(bare)) return `${host} is a private-network name`
      }
      let addresses: LookupAddress[]
      try {
        addresses = await withTimeout(resolve(host), CREATION_LOOKUP_MS)
      } catch {
        return undefined // does not resolve now: each attempt resolves and checks again
      }
      return firstRefused(host, addresses)
    },

    lookup: (hostname: string, options: LookupOptions, callback: Parameters<LookupFunction>[2]) => {
      resolve(hostname).then(
        (addresses) => {
          const refused = firstRefused(hostname, addresses)
          if (refused !== undefined) return callback(new DestinationRefused(refused), '', 0)
          const [first] = addresses
          if (first === undefined) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0)
          if (options.all === true) callback(null, addresses)
          else callback(null, first.address, first.family)
        },
        (error: NodeJS.ErrnoException) => callback(error, '', 0),
      )
    },
  }
}

/** The URL's host as a resolver or isIP reads it: an IPv6 literal without its brackets. */
export const hostOf = (url: URL): string => url.hostname.replace(/^\[(.*)\]$/, '$1')

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timed out')), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}
