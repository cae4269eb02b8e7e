/**
 * At most `concurrency` jobs at once; when a place frees, the key served least recently among
 * those with jobs waiting goes next. A key with many jobs queued thus gets one turn in each
 * round, like every other key, and a key that just arrived goes before one that was just
 * served. The event hub reads its streams' backlogs through one, keyed by company, so that
 * many streams replaying at once neither take the store from the writes nor make one
 * company's replays wait behind another's.
 */
export interface FairGate {
  run<T>(key: string, job: () => Promise<T>): Promise<T>
  /** jobs waiting for a turn */
  waiting(): number
}

export function createFairGate(concurrency: number): FairGate {
  const queues = new Map<string, Array<() => void>>()
  /** per key with jobs waiting or running: when its last job started (a serial number), and how many it has */
  const keys = new Map<string, { servedAt: number; jobs: number }>()
  let serial = 0
  let running = 0
  let waiting = 0

  function leastRecentlyServed(): string | undefined {
    let chosen: string | undefined
    let chosenAt = Infinity
    for (const key of queues.keys()) {
      const servedAt = keys.get(key)!.servedAt
      if (servedAt < chosenAt) [chosen, chosenAt] = [key, servedAt]
    }
    return chosen
  }

  function startNext(): void {
    while (running < concurrency) {
      const key = leastRecentlyServed()
      if (key === undefined) return
      const queue = queues.get(key)!
      const start = queue.shift()!
      if (queue.length === 0) queues.delete(key)
      keys.get(key)!.servedAt = serial++
      running++
      waiting--
      start()
    }
  }

  return {
    run(key, job) {
      return new Promise((resolve, reject) => {
        const start = () => {
          const finished = () => {
            running--
            const state = keys.get(key)!
            if (--state.jobs === 0) keys.delete(key)
            startNext()
          }
          Promise.resolve().then(job).then(resolve, reject).finally(finished)
        }
        const state = keys.get(key)
        if (state === undefined) keys.set(key, { servedAt: -1, jobs: 1 })
        else state.jobs++
        const queue = queues.get(key)
        if (queue === undefined) queues.set(key, [start])
        else queue.push(start)
        waiting++
        startNext()
      })
    },
    waiting: () => waiting,
  }
}
