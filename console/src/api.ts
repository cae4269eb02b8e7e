import { createContext } from 'preact'
import { useCallback, useContext, useEffect, useRef, useState } from 'preact/hooks'
import { ChatAuthError, type AdminClient } from '../../src/client/index.js'
import { sameOrigin, type Session } from './session.js'

/**
 * The admin API through the project's typed client (chat-auth-gateway/client), riding on the
 * session cookie: the page holds no token, only the session's anti-CSRF proof.
 */
export function adminClient(session: Session): AdminClient {
  return sameOrigin(session.csrf).admin
}

export interface Console {
  session: Session
  admin: AdminClient
  /** the API answered 401: the session ended (signed out elsewhere, idle, operator revoked) */
  sessionLost: () => void
}

export const ConsoleContext = createContext<Console | null>(null)

export function useConsole(): Console {
  const context = useContext(ConsoleContext)
  if (context === null) throw new Error('useConsole outside the signed-in console')
  return context
}

/** A failure as the page says it: the gateway's message and code, or what went wrong on the way. */
export function describeError(error: unknown): string {
  if (error instanceof ChatAuthError) return error.statusCode === 0 ? error.message : `${error.message} (${error.statusCode} ${error.code})`
  return error instanceof Error ? error.message : String(error)
}

export const isSessionEnd = (error: unknown): boolean => error instanceof ChatAuthError && error.statusCode === 401

export interface Loaded<T> {
  data: T | undefined
  error: unknown
  loading: boolean
  reload: () => void
}

/**
 * Reads `load` when `key` changes (and on `reload`, and every `everyMs` when given); a 401
 * ends the session. Answers to a read that was superseded are dropped.
 */
export function useLoad<T>(load: (admin: AdminClient) => Promise<T>, key: string, everyMs?: number): Loaded<T> {
  const { admin, sessionLost } = useConsole()
  const [state, setState] = useState<{ key: string; data?: T; error?: unknown; loading: boolean }>({ key, loading: true })
  const [round, setRound] = useState(0)
  const latest = useRef(0)
  const loadRef = useRef(load)
  loadRef.current = load
  useEffect(() => {
    const call = ++latest.current
    setState((before) => (before.key === key ? { ...before, loading: true } : { key, loading: true }))
    loadRef.current(admin).then(
      (data) => call === latest.current && setState({ key, data, loading: false }),
      (error: unknown) => {
        if (call !== latest.current) return
        if (isSessionEnd(error)) return sessionLost()
        setState((before) => ({ key, data: before.key === key ? before.data : undefined, error, loading: false }))
      },
    )
  }, [key, round, admin, sessionLost])
  useEffect(() => {
    if (everyMs === undefined) return
    const timer = setInterval(() => setRound((n) => n + 1), everyMs)
    return () => clearInterval(timer)
  }, [everyMs])
  const reload = useCallback(() => setRound((n) => n + 1), [])
  const current = state.key === key
  return { data: current ? state.data : undefined, error: current ? state.error : undefined, loading: state.loading || !current, reload }
}

/** A write: running, its answer or its failure; a 401 ends the session. */
export function useAction<A extends unknown[], T>(act: (admin: AdminClient, ...args: A) => Promise<T>) {
  const { admin, sessionLost } = useConsole()
  const [state, setState] = useState<{ running: boolean; result?: T; error?: unknown }>({ running: false })
  const run = useCallback(
    async (...args: A): Promise<T | undefined> => {
      setState({ running: true })
      try {
        const result = await act(admin, ...args)
        setState({ running: false, result })
        return result
      } catch (error) {
        if (isSessionEnd(error)) sessionLost()
        setState({ running: false, error })
        return undefined
      }
    },
    [admin, sessionLost],
  )
  const clear = useCallback(() => setState({ running: false }), [])
  return { ...state, run, clear }
}
