import { useEffect, useRef, useState } from 'preact/hooks'
import { ChatAuthError } from '../../../src/client/index.js'
import { signIn, type Session } from '../session.js'

/**
 * The token is read from the field once, sent to the session API, and the field cleared: from
 * then on the page holds only the session's role, name and anti-CSRF token (SPEC §10.3).
 */
export function SignIn({ notice, onSignedIn }: { notice?: string; onSignedIn: (session: Session) => void }) {
  const [error, setError] = useState<string | undefined>()
  const [busy, setBusy] = useState(false)
  const field = useRef<HTMLInputElement>(null)
  useEffect(() => {
    document.title = 'Sign in · chat-auth console'
    field.current?.focus()
  }, [])
  async function submit(event: Event) {
    event.preventDefault()
    const input = field.current!
    const token = input.value.trim()
    if (token === '') return setError('Paste your operator token (or the deployment\'s ADMIN_TOKEN).')
    setBusy(true)
    setError(undefined)
    try {
      const session = await signIn(token)
      input.value = ''
      onSignedIn(session)
    } catch (failure) {
      const message = failure instanceof Error ? failure.message : String(failure)
      setError(failure instanceof ChatAuthError && failure.statusCode === 429 ? `${message}: too many attempts, wait a minute` : message)
      setBusy(false)
    }
  }
  return (
    <main class="sign-in" id="main">
      <form onSubmit={(event) => void submit(event)} aria-labelledby="sign-in-title">
        <h1 id="sign-in-title">chat-auth console</h1>
        <p class="muted">Sign in with your operator token. It is exchanged once for a session cookie that the page cannot read; the page never keeps it.</p>
        {notice && (
          <p class="notice" role="status">
            {notice}
          </p>
        )}
        <label for="token">Operator token or ADMIN_TOKEN</label>
        <input ref={field} id="token" name="token" type="password" autocomplete="off" spellcheck={false} required aria-describedby={error ? 'sign-in-error' : undefined} />
        {error && (
          <p class="problem" role="alert" id="sign-in-error">
            {error}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  )
}
