import type { RevokedToken } from '../domain.js'
import type { MaybePromise } from './states.js'

/**
 * The node's set of tokens revoked one by one (SPEC §7.1), jti → exp, so that a verification
 * asks it a `Map.has` and nothing else. Each jti is forgotten once its token has expired
 * (past the clock tolerance too): the set holds only what could still be presented.
 *
 * The set answers alone only while it is *complete*: a load of every live revocation from
 * the store, started after the last epoch change (a flush: the moment from which the bus
 * delivers every change again), has finished. A node that starts, or whose caches are
 * flushed, reloads; until the load is in, and while the bus does not vouch for the node,
 * each question is a store read. Messages — live, or replayed by the catch-up after a
 * reconnect (the change log holds each revocation as the row `token`, revision `exp`) —
 * are added whenever they come, loaded or not.
 */
export interface RevokedTokens {
  /** Without I/O while complete and trusted; a store read otherwise. */
  isRevoked(jti: string): MaybePromise<boolean>
  add(token: RevokedToken): void
  /** Changes may have been missed: answer from the store until a new load is in. */
  reload(): void
  readonly size: number
  readonly complete: boolean
  close(): void
}

export interface RevokedTokensOptions {
  /** every revocation whose token has not expired (with the tolerance) */
  load: () => Promise<RevokedToken[]>
  /** the store's answer for one jti */
  read: (jti: string) => Promise<boolean>
  trusted: () => boolean
  /** kept this long past exp: verification accepts a token until exp + tolerance */
  graceSeconds: number
  now?: () => number
  /** how often expired entries are swept out (default 60 s) */
  sweepEveryMs?: number
}

export function createRevokedTokens(options: RevokedTokensOptions): RevokedTokens {
  const now = options.now ?? Date.now
  const expiries = new Map<string, number>()
  let generation = 0
  let complete = false
  let loading = false

  const live = (exp: number) => exp + options.graceSeconds > now() / 1000

  function add({ jti, exp }: RevokedToken): void {
    if (!live(exp)) return
    const known = expiries.get(jti)
    if (known === undefined || known < exp) expiries.set(jti, exp)
  }

  function startLoad(): void {
    if (loading) return
    loading = true
    const started = generation
    options.load().then(
      (tokens) => {
        loading = false
        for (const token of tokens) add(token)
        // A load that began before the last epoch change may lack what was missed since.
        if (started === generation) complete = true
        else startLoad()
      },
      () => {
        // The store is away: questions keep going to the store (and fail there, as 503);
        // the next question tries the load again.
        loading = false
      },
    )
  }

  function sweep(): void {
    for (const [jti, exp] of expiries) if (!live(exp)) expiries.delete(jti)
  }
  const sweeper = setInterval(sweep, options.sweepEveryMs ?? 60_000)
  sweeper.unref()
  startLoad()

  return {
    isRevoked(jti) {
      if (complete && options.trusted()) return expiries.has(jti)
      if (!complete) startLoad()
      return options.read(jti)
    },
    add,
    reload() {
      generation++
      complete = false
      startLoad()
    },
    get size() {
      return expiries.size
    },
    get complete() {
      return complete
    },
    close: () => clearInterval(sweeper),
  }
}
