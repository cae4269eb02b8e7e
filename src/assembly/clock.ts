import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { Store } from '../store/store.js'
import { watchClock, type ClockWatch } from '../clock/offset.js'
import type { OnClose } from './lifecycle.js'

/**
 * The node's watch on its clock against PostgreSQL's (clock/offset.ts): its first reading
 * taken before the node serves, its timer closed with the node, its offset on /metrics.
 */
export async function openClock(onClose: OnClose, config: Config, options: { store: Pick<Store, 'clock'>; logger: Logger; metrics: Metrics }): Promise<ClockWatch> {
  const clock = watchClock({ databaseClock: () => options.store.clock(), maxSkewSeconds: config.maxClockSkewSeconds, logger: options.logger.child({ component: 'clock' }) })
  onClose(() => clock.close())
  await clock.first
  const seconds = (read: (reading: NonNullable<ReturnType<ClockWatch['reading']>>) => number) => () => {
    const reading = clock.reading()
    return reading === undefined ? [] : [{ labels: {}, value: read(reading) / 1000 }]
  }
  options.metrics.collect('chat_auth_clock_offset_seconds', "PostgreSQL's clock minus this node's, at the last reading (positive: the node's clock lags)", 'gauge', seconds((r) => r.offsetMs))
  options.metrics.collect('chat_auth_clock_offset_uncertainty_seconds', 'The last clock reading is within ± this (half its round trip)', 'gauge', seconds((r) => r.uncertaintyMs))
  options.metrics.collect('chat_auth_clock_skewed', "1 while this node's clock is certainly off PostgreSQL's by more than MAX_CLOCK_SKEW", 'gauge', () => (clock.state() === 'skewed' ? 1 : 0))
  return clock
}
