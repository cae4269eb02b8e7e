import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks'
import { adminClient, ConsoleContext, describeError, type Console } from './api.js'
import { navigate, useLocation, withQuery, type Location } from './router.js'
import { currentSession, may, signOut, type Session } from './session.js'
import { Link, Loading } from './ui.js'
import { SignIn } from './screens/sign-in.js'
import { Nodes } from './screens/nodes.js'
import { FindUser } from './screens/find-user.js'
import { UserPage } from './screens/user.js'
import { Companies } from './screens/companies.js'
import { CompanyPage } from './screens/company.js'
import { Operators } from './screens/operators.js'

const SCREENS: { path: string; label: string; role?: 'admin' }[] = [
  { path: '/nodes', label: 'Nodes' },
  { path: '/users', label: 'Find a user' },
  { path: '/companies', label: 'Companies' },
  { path: '/operators', label: 'Operators', role: 'admin' },
]

export function App() {
  const where = useLocation()
  /** undefined: not known yet; null: signed out */
  const [session, setSession] = useState<Session | null | undefined>(undefined)
  const [notice, setNotice] = useState<string | undefined>()
  useEffect(() => {
    currentSession().then(setSession, (error: unknown) => {
      setNotice(describeError(error))
      setSession(null)
    })
  }, [])

  const sessionLost = useCallback(() => {
    setSession(null)
    setNotice('Your session has ended (signed out, idle too long, or your operator token was revoked). Sign in again.')
  }, [])
  const context = useMemo<Console | null>(() => (session ? { session, admin: adminClient(session), sessionLost } : null), [session, sessionLost])

  // Signed out: every screen's URL leads to the sign-in, and back to that screen after it.
  useEffect(() => {
    if (session === null && where.path !== '/sign-in') navigate(withQuery('/sign-in', { next: here(where) }), { replace: true })
    if (session && where.path === '/sign-in') navigate(safeNext(where.query.get('next')), { replace: true })
    if (session && where.path === '/') navigate('/nodes', { replace: true })
  }, [session, where])

  if (session === undefined) return <Loading />
  if (session === null || context === null || where.path === '/sign-in') {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(signedIn) => {
          setNotice(undefined)
          setSession(signedIn)
        }}
      />
    )
  }
  return (
    <ConsoleContext.Provider value={context}>
      <Shell session={session} where={where} onSignedOut={() => setSession(null)} />
    </ConsoleContext.Provider>
  )
}

const here = (where: Location) => where.path + (where.query.size > 0 ? `?${where.query}` : '')

/** Only a path of the console: a `next` never leads elsewhere. */
function safeNext(next: string | null): string {
  return next !== null && /^\/[a-z]/.test(next) && !next.startsWith('/sign-in') ? next : '/nodes'
}

function Shell({ session, where, onSignedOut }: { session: Session; where: Location; onSignedOut: () => void }) {
  const [signOutError, setSignOutError] = useState<string | undefined>()
  const main = useRef<HTMLElement>(null)
  const first = useRef(true)
  // A new screen: the keyboard starts at its heading, as a new page would.
  useEffect(() => {
    if (first.current) return void (first.current = false)
    main.current?.querySelector<HTMLElement>('h1')?.focus()
  }, [where.path])
  const current = SCREENS.find((screen) => where.path === screen.path || where.path.startsWith(`${screen.path}/`))
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">chat-auth console</span>
        <nav aria-label="Screens">
          {SCREENS.filter((screen) => screen.role === undefined || may(session.role, screen.role)).map((screen) => (
            <Link key={screen.path} to={screen.path} class={screen === current ? 'current' : undefined}>
              {screen.label}
            </Link>
          ))}
        </nav>
        <span class="who">
          <span>{session.name}</span> <span class={`badge role-${session.role}`}>{session.role}</span>
          <button
            type="button"
            onClick={() =>
              void signOut(session.csrf).then(onSignedOut, (error: unknown) => {
                setSignOutError(describeError(error))
              })
            }
          >
            Sign out
          </button>
        </span>
      </header>
      {signOutError && (
        <p class="problem" role="alert">
          Sign-out failed: {signOutError}
        </p>
      )}
      <main id="main" ref={main}>
        <Screen where={where} role={session.role} />
      </main>
    </div>
  )
}

function Screen({ where, role }: { where: Location; role: Session['role'] }) {
  const [, section, id] = where.path.split('/')
  if (section === 'nodes' && id === undefined) return <Nodes />
  if (section === 'users' && id === undefined) return <FindUser query={where.query} />
  if (section === 'users' && id !== undefined) return <UserPage id={decodeURIComponent(id)} />
  if (section === 'companies' && id === undefined) return <Companies query={where.query} />
  if (section === 'companies' && id !== undefined) return <CompanyPage id={decodeURIComponent(id)} query={where.query} />
  if (section === 'operators' && id === undefined && may(role, 'admin')) return <Operators />
  return (
    <>
      <h1 tabIndex={-1}>Not found</h1>
      <p>
        There is no such screen{section === 'operators' ? ' for your role' : ''}. <Link to="/nodes">Go to the nodes</Link>.
      </p>
    </>
  )
}
