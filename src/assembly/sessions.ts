import type { Logger } from 'pino'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { InvalidationBus } from '../bus/bus.js'
import type { VerifyToken } from '../auth/verify.js'
import type { Store } from '../store/store.js'
import { createSessions, type Sessions } from '../sessions/sessions.js'
import { throttledLog } from '../throttled-log.js'
import type { OnClose } from './lifecycle.js'

/**
 * The node's open sessions (SPEC §8.1, sessions/), told of each change after the caches
 * (change-pipeline.ts), and closed before them (every open session aborted with
 * NODE_CLOSING while the bus is still up). A node that opens no session pays one Map lookup
 * per change.
 */
export function openSessions(onClose: OnClose, config: Config, parts: { store: Store; bus: InvalidationBus; verifyToken: VerifyToken; metrics: Metrics; logger: Logger }): Sessions {
  const { store, bus, verifyToken, metrics, logger } = parts
  const failed = throttledLog(parts.logger, Date.now)
  const sessions = createSessions({
    verifyToken,
    bus,
    store,
    clockToleranceSeconds: config.jwt.clockToleranceSeconds,
    recheckEveryMs: config.leaseMs,
    onRecheckError: (error) => failed('open sessions could not be checked against the store', { err: error instanceof Error ? error.message : String(error) }),
  })
  onClose(() => {
    if (sessions.size > 0) logger.info({ sessions: sessions.size }, 'closing open sessions')
    sessions.close()
  })
  metrics.collect('chat_auth_open_sessions', 'Sessions open on this node (openChatSession), each watched until its token stops being valid', 'gauge', () => sessions.size)
  return sessions
}
