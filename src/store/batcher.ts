/**
 * Bookkeeping writes off the request path: ids are collected and written together in one
 * statement a moment later. A failed write is reported and dropped: what a batch records
 * must be best-effort (an API key's last use).
 */
export interface Batcher {
  add(id: string): void
  /** Writes what is pending and waits for every write in flight. */
  drain(): Promise<void>
}

export function createBatcher(options: {
  write: (ids: string[]) => Promise<void>
  onError: (error: unknown, ids: number) => void
  /** when to write after the first id of a batch: setImmediate, or a timer */
  schedule: (flush: () => void) => void
}): Batcher {
  const pending = new Set<string>()
  const inFlight = new Set<Promise<void>>()
  let scheduled = false

  const flush = () => {
    scheduled = false
    if (pending.size === 0) return
    const ids = [...pending]
    pending.clear()
    const write = options
      .write(ids)
      .catch((error) => options.onError(error, ids.length))
      .finally(() => inFlight.delete(write))
    inFlight.add(write)
  }

  return {
    add(id) {
      pending.add(id)
      if (!scheduled) {
        scheduled = true
        options.schedule(flush)
      }
    },
    async drain() {
      flush()
      await Promise.allSettled([...inFlight])
    },
  }
}
