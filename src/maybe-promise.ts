/**
 * A value now, or a promise of it: what the caches answer (a hit is a plain value, a miss a
 * store read), and so what every step over them answers (auth/, http/, routes/).
 */
export type MaybePromise<T> = T | Promise<T>

/**
 * `next(value)`, at once when the value is there (a cache hit), after it when it is a
 * promise: a path that finds everything cached makes no promise and takes no turn of the
 * microtask queue. A throw from `next` on the synchronous path is a synchronous throw.
 */
export function andThen<T, R>(value: MaybePromise<T>, next: (value: T) => MaybePromise<R>): MaybePromise<R> {
  return value instanceof Promise ? value.then(next) : next(value)
}
