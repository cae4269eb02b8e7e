import type { PrimaryWatch } from './primary-watch.js'

export interface PrimaryVouchingOptions {
  /** what a majority of the sentinels, or of the cluster's nodes, says (connection/watch.ts); undefined with one Redis server: nothing to vouch for */
  watch: PrimaryWatch | undefined
  /** what the connections follow (the watch, or with a Cluster whose watch a test took out, the unwrapped one): asked every tick all the same */
  routing: PrimaryWatch | undefined
  subscriber: { address(): string | undefined; drop(reason: string): void }
  registry: { address(): string | undefined; reconnect(): void }
}

export interface PrimaryVouching {
  /** With Sentinel or a Cluster: only while a majority of voters, asked within a lease, name the server we are subscribed to. */
  vouched(at: number): boolean
  /** Connections on a server the majority no longer names are dropped; the next one goes where it names now. */
  leaveFormerPrimary(): void
  poll(): void
  close(): void
}

/** Redis Sentinel or Cluster: which server the bus must be on (connection/watch.ts), held against the bus's two connections. */
export function createPrimaryVouching({ watch, routing, subscriber, registry }: PrimaryVouchingOptions): PrimaryVouching {
  if (watch === undefined) return { vouched: () => true, leaveFormerPrimary() {}, poll: () => routing?.poll(), close: () => routing?.close() }
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
