import { NOT_IN_HEAP, type Session } from './session.js'

/** setTimeout's longest delay; a later expiry is reached by waking up once on the way. */
const MAX_DELAY_MS = 2 ** 31 - 1

/**
 * Every open session by its expiry, in one min-heap with one timer (for the earliest): a
 * session costs a slot in an array, not a timer of its own. A session knows its place in
 * the heap, so closing one removes it at once (nothing is left behind until it would expire).
 */
export function createExpiry(onExpired: (session: Session) => void, toleranceSeconds: number, now: () => number = Date.now) {
  /** the instant verify starts answering TOKEN_EXPIRED: exp + JWT_CLOCK_TOLERANCE */
  const expiresAtMs = (session: Session) => (session.exp + toleranceSeconds) * 1000
  const heap: Session[] = []
  let timer: NodeJS.Timeout | undefined
  let timerAt = Infinity

  const less = (a: number, b: number) => heap[a]!.exp < heap[b]!.exp
  function swap(a: number, b: number): void {
    const first = heap[a]!
    const second = heap[b]!
    heap[a] = second
    heap[b] = first
    second.heapIndex = a
    first.heapIndex = b
  }
  function up(index: number): void {
    while (index > 0) {
      const parent = (index - 1) >> 1
      if (!less(index, parent)) return
      swap(index, parent)
      index = parent
    }
  }
  function down(index: number): void {
    for (;;) {
      const left = 2 * index + 1
      const right = left + 1
      let smallest = index
      if (left < heap.length && less(left, smallest)) smallest = left
      if (right < heap.length && less(right, smallest)) smallest = right
      if (smallest === index) return
      swap(index, smallest)
      index = smallest
    }
  }

  /** One timer, set for the earliest expiry; moved only when the earliest changes. */
  function schedule(): void {
    if (firing) return
    const first = heap[0]
    const at = first === undefined ? Infinity : expiresAtMs(first)
    if (at === timerAt) return
    if (timer !== undefined) clearTimeout(timer)
    timer = undefined
    timerAt = at
    if (first === undefined) return
    timer = setTimeout(fire, Math.min(MAX_DELAY_MS, Math.max(0, at - now())))
    timer.unref()
  }

  // while expired sessions are taken off, the timer is set once, at the end
  let firing = false
  function fire(): void {
    timer = undefined
    timerAt = Infinity
    const current = now()
    firing = true
    try {
      while (heap.length > 0 && expiresAtMs(heap[0]!) <= current) {
        const session = heap[0]!
        // the registry ends it, which takes it off the heap (leaving the heap is what marks a
        // session ended); should it not, it leaves here, so that the loop moves on
        onExpired(session)
        remove(session)
      }
    } finally {
      firing = false
    }
    schedule()
  }

  function remove(session: Session): void {
    const index = session.heapIndex
    if (index === NOT_IN_HEAP) return
    const last = heap.pop()!
    session.heapIndex = NOT_IN_HEAP
    if (last !== session) {
      heap[index] = last
      last.heapIndex = index
      up(index)
      down(last.heapIndex)
    }
    schedule()
  }

  return {
    add(session: Session): void {
      session.heapIndex = heap.length
      heap.push(session)
      up(session.heapIndex)
      schedule()
    },
    remove,
    get size() {
      return heap.length
    },
    stop(): void {
      if (timer !== undefined) clearTimeout(timer)
      timer = undefined
      timerAt = Infinity
    },
  }
}

export type Expiry = ReturnType<typeof createExpiry>
