import type { SentinelWatch } from './sentinel-watch.js'

export interface PrimaryVouchingOptions {
  /** what the sentinels say (sentinel-watch.ts); undefined with one Redis server: nothing to vouch for */
  watch: SentinelWatch | undefined
  subscriber: { address(): string | undefined; drop(reason: string): void }
  registry: { address(): string | undefined; reconnect(): void }
}

export interface PrimaryVouching {
  /** With Sentinel: only while a majority of sentinels, asked within a lease, name the server we are subscribed to. */
  vouched(at: number): boolean
  /** Connections on a server the sentinels no longer name are dropped; ioredis asks them again. */
  leaveFormerPrimary(): void
  poll(): void
  close(): void
}

/** Redis Sentinel: which server is the primary (sentinel-watch.ts), held against the bus's two connections. */
export function createPrimaryVouching({ watch, subscriber, registry }: PrimaryVouchingOptions): PrimaryVouching {
  if (watch === undefined) return { vouched: () => true, leaveFormerPrimary() {}, poll() {}, close() {} }
  return {
    vouched(at) {
      const address = subscriber.address()
      return address !== undefined && address === watch.primaryAddress() && at < watch.vouchedUntil()
    },
    leaveFormerPrimary() {
      const primary = watch.primaryAddress()
      if (primary === undefined) return
      const subscribed = subscriber.address()
      if (subscribed !== undefined && subscribed !== primary) subscriber.drop('primary_changed')
      const commandAddress = registry.address()
      if (commandAddress !== undefined && commandAddress !== primary) registry.reconnect()
    },
    poll: () => watch.poll(),
    close: () => watch.close(),
  }
}
