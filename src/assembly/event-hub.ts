import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Store } from '../store/store.js'
import { createEventHub, type EventHub } from '../stream/hub.js'
import { cursorSecretOf } from '../stream/cursor-secret.js'
import type { OnClose } from './lifecycle.js'
import type { NodeParts } from './bus.js'

export interface EventStreams {
  hub: EventHub
  /** the secret the listing's and the stream's cursors are MACed with */
  cursorSecret: () => Promise<Buffer>
}

/**
 * The node's event streams (SPEC §8.2, stream/): the hub takes every change the bus
 * delivers (change-pipeline.ts), and its promise holds the node's acknowledgement until the
 * change's events are written to the open streams. A node with no stream open pays one check per change. The
 * HTTP app ends the streams before the server closes (they would keep it open); a node
 * without HTTP closes the hub with the rest.
 */
export function openEventStreams(onClose: OnClose, config: Config, parts: { store: Store; logger: Logger; wrap?: NodeParts['eventHub'] }): EventStreams {
  const { store, logger } = parts
  const cursorSecret = cursorSecretOf(store)
  const made = createEventHub({ store, cursorSecret, logger, maxStreams: config.limits.maxEventStreams, maxStreamsPerCompany: config.limits.maxEventStreamsPerCompany })
  const hub = parts.wrap ? parts.wrap(made) : made
  onClose(() => hub.close())
  return { hub, cursorSecret }
}
