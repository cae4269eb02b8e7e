import { useEffect, useState } from 'preact/hooks'
import { useConsole, describeError } from '../api.js'
import { navigate, withQuery } from '../router.js'
import { Link, Problem } from '../ui.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/**
 * SPEC §10.3 "Find a user": by customerUserId, or by company and external id. The search is in
 * the URL (/users?companyId=…&externalId=…), so a pasted link searches again; a user found
 * replaces it with the user's own page.
 */
export function FindUser({ query }: { query: URLSearchParams }) {
  useEffect(() => void (document.title = 'Find a user · chat-auth console'), [])
  const companyId = query.get('companyId') ?? ''
  const externalId = query.get('externalId') ?? ''
  return (
    <>
      <h1 tabIndex={-1}>Find a user</h1>
      <div class="columns">
        <ById />
        <ByExternalId companyId={companyId} externalId={externalId} />
      </div>
    </>
  )
}

function ById() {
  const [error, setError] = useState<string | undefined>()
  function submit(event: Event) {
    event.preventDefault()
    const id = (new FormData(event.currentTarget as HTMLFormElement).get('customerUserId') as string).trim()
    if (!UUID.test(id)) return setError('A customerUserId is a UUID, like 3f2b…-…')
    navigate(`/users/${id}`)
  }
  return (
    <form class="card" onSubmit={submit} aria-labelledby="by-id">
      <h2 id="by-id">By customerUserId</h2>
      <label for="customerUserId">customerUserId</label>
      <input id="customerUserId" name="customerUserId" spellcheck={false} autocomplete="off" required />
      {error && (
        <p class="problem" role="alert">
          {error}
        </p>
      )}
      <button type="submit" class="primary">
        Open the user
      </button>
    </form>
  )
}

export function ByExternalId({ companyId, externalId, fixedCompany = false, title = 'By company and external id' }: { companyId: string; externalId: string; fixedCompany?: boolean; title?: string }) {
  const { admin, sessionLost } = useConsole()
  const [state, setState] = useState<{ searching: boolean; error?: string }>({ searching: false })
  // The search in the URL runs on load (a pasted link) and after each submit.
  useEffect(() => {
    if (companyId === '' || externalId === '' || fixedCompany) return
    let current = true
    setState({ searching: true })
    admin.findCustomerUser(companyId, externalId).then(
      (user) => current && navigate(`/users/${user.id}`, { replace: true }),
      (error: { statusCode?: number }) => {
        if (!current) return
        if (error.statusCode === 401) return sessionLost()
        setState({ searching: false, error: error.statusCode === 404 ? `No user with the external id "${externalId}" in that company.` : describeError(error) })
      },
    )
    return () => void (current = false)
  }, [companyId, externalId, fixedCompany, admin, sessionLost])

  function submit(event: Event) {
    event.preventDefault()
    const form = new FormData(event.currentTarget as HTMLFormElement)
    const company = ((form.get('companyId') as string | null) ?? companyId).trim()
    const external = (form.get('externalId') as string).trim()
    if (!UUID.test(company)) return setState({ searching: false, error: 'A company id is a UUID: find it on the Companies screen.' })
    navigate(withQuery('/users', { companyId: company, externalId: external }))
  }
  return (
    <form class={fixedCompany ? 'card narrow' : 'card'} onSubmit={submit} aria-labelledby="by-external-id">
      <h2 id="by-external-id">{title}</h2>
      {!fixedCompany && (
        <>
          <label for="companyId">Company id</label>
          <input id="companyId" name="companyId" spellcheck={false} autocomplete="off" required value={companyId} />
          <p class="hint">
            Not at hand? <Link to="/companies">Search the companies by name</Link>.
          </p>
        </>
      )}
      <label for="externalId">External id (the id the customer knows)</label>
      <input id="externalId" name="externalId" spellcheck={false} autocomplete="off" required value={externalId} />
      {state.error && <Problem error={new Error(state.error)} />}
      <button type="submit" class="primary" disabled={state.searching}>
        {state.searching ? 'Searching…' : 'Find'}
      </button>
    </form>
  )
}
