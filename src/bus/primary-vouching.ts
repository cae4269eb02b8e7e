import type { Logger } from 'pino'
import type { RedisConnection } from '../config.js'
import { createSentinelWatch, type SentinelWatch } from './sentinel-watch.js'

export interface PrimaryVouchingOptions {
  connection: RedisConnection
  leaseMs: number
  now: () => number
  log: Logger
  warn: (what: string, fields: Record<string, unknown>) => void
  countError: () => void
  newEpoch: (reason: string) => void
  /** the bus's two connections (made after this; only asked once it runs) */
  connections: () => {
    subscriber: { isSubscribed(): boolean; drop(reason: string): void }
    registry: { address(): string | undefined; reconnect(): void }
  }
  /** UNSAFE (chaos mutant `no-primary-check`): trust the subscribed server without asking the sentinels */
  unsafeNoPrimaryCheck?: boolean
}

export interface PrimaryVouching {
  /** the address of the server the subscriber is on (undefined: none) */
  subscribedTo(address: string | undefined): void
  /** With Sentinel: only while a majority of sentinels, asked within a lease, name the server we are subscribed to. */
  vouched(at: number): boolean
  /** Connections on a server the sentinels no longer name are dropped; ioredis asks them again. */
  leaveFormerPrimary(): void
  poll(): void
  /** for the publisher: undefined without Sentinel */
  confirm: SentinelWatch['confirm'] | undefined
  close(): void
}

/** Redis Sentinel: which server is the primary (sentinel-watch.ts), wired to the bus's connections and trust. */
export function createPrimaryVouching(options: PrimaryVouchingOptions): PrimaryVouching {
  const { connection, log } = options
  let subscribedAddress: string | undefined
  const watch: SentinelWatch | undefined =
    connection.kind === 'sentinel' && !options.unsafeNoPrimaryCheck
      ? createSentinelWatch({
          connection,
          leaseMs: options.leaseMs,
          queryTimeoutMs: options.leaseMs,
          now: options.now,
          onPrimaryChanged(address) {
            // What the caches hold may predate changes published on the new primary.
            options.newEpoch('primary_changed')
            log.warn({ primary: address }, address === undefined ? 'no majority of sentinels names a primary' : 'the sentinels name a new primary')
            leaveFormerPrimary()
          },
          onError(error) {
            options.countError()
            options.warn('redis sentinel connection error', { err: error.message })
          },
        })
      : undefined
  if (options.unsafeNoPrimaryCheck) log.warn('UNSAFE: the primary is not checked with the sentinels (chaos-test entry point)')

  function leaveFormerPrimary(): void {
    const primary = watch?.primaryAddress()
    if (primary === undefined) return
    const { subscriber, registry } = options.connections()
    if (subscriber.isSubscribed() && subscribedAddress !== primary) subscriber.drop('primary_changed')
    const commandAddress = registry.address()
    if (commandAddress !== undefined && commandAddress !== primary) registry.reconnect()
  }

  return {
    subscribedTo(address) {
      subscribedAddress = address
    },
    vouched: (at) => watch === undefined || (subscribedAddress !== undefined && subscribedAddress === watch.primaryAddress() && at < watch.vouchedUntil()),
    leaveFormerPrimary,
    poll: () => watch?.poll(),
    confirm: watch?.confirm,
    close: () => watch?.close(),
  }
}
