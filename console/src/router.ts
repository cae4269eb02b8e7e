import { useEffect, useState } from 'preact/hooks'

/**
 * Every screen has its own URL under /console/ (SPEC §10.3: an operator can paste a link);
 * the server answers each with index.html. Links and forms move with the History API, so
 * back, forward and reload all land on the same screen.
 */
export const BASE = '/console'

export interface Location {
  /** the path below /console, e.g. "/users/…" */
  path: string
  query: URLSearchParams
}

const read = (): Location => ({ path: location.pathname.slice(BASE.length).replace(/\/+$/, '') || '/', query: new URLSearchParams(location.search) })

const listeners = new Set<() => void>()

/** Goes to `to` (a path below /console, with its query); `replace` leaves no history entry. */
export function navigate(to: string, { replace = false } = {}): void {
  const url = BASE + to
  if (url === location.pathname + location.search) return
  if (replace) history.replaceState(null, '', url)
  else history.pushState(null, '', url)
  for (const listener of listeners) listener()
}

export function useLocation(): Location {
  const [where, setWhere] = useState(read)
  useEffect(() => {
    const update = () => setWhere(read())
    listeners.add(update)
    addEventListener('popstate', update)
    return () => {
      listeners.delete(update)
      removeEventListener('popstate', update)
    }
  }, [])
  return where
}

/** A path with a query, leaving out empty values. */
export function withQuery(path: string, query: Record<string, string | undefined>): string {
  const search = new URLSearchParams(Object.entries(query).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '')).toString()
  return search === '' ? path : `${path}?${search}`
}

/** A plain link click (no modifier, left button) stays in the page; others open as usual. */
export function followLink(event: MouseEvent, to: string): void {
  if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return
  event.preventDefault()
  navigate(to)
}
