import { useEffect, useRef } from 'preact/hooks'
import { useAction, useConsole, useLoad } from '../api.js'
import { navigate, withQuery } from '../router.js'
import { may } from '../session.js'
import { Empty, Id, Link, Loading, Pager, Problem, Time } from '../ui.js'

const PAGE = 25

/** SPEC §10.2's company search, a page at a time; the query and the page are in the URL. */
export function Companies({ query }: { query: URLSearchParams }) {
  const { session } = useConsole()
  const name = query.get('query') ?? ''
  const after = query.get('after') ?? undefined
  useEffect(() => void (document.title = 'Companies · chat-auth console'), [])
  const page = useLoad((admin) => admin.searchCompanies({ query: name === '' ? undefined : name, limit: PAGE, after }), `companies:${name}:${after ?? ''}`)
  // The cursors that led here, so that Previous goes back a page (a pasted link starts anew).
  const trail = useRef<string[]>([])
  const search = (event: Event) => {
    event.preventDefault()
    trail.current = []
    navigate(withQuery('/companies', { query: (new FormData(event.currentTarget as HTMLFormElement).get('query') as string).trim() }))
  }
  const companies = page.data?.companies
  return (
    <>
      <h1 tabIndex={-1}>Companies</h1>
      <form class="search" role="search" onSubmit={search}>
        <label for="company-query">Name contains</label>
        <input id="company-query" name="query" type="search" value={name} autocomplete="off" />
        <button type="submit" class="primary">
          Search
        </button>
      </form>
      <Problem error={page.error} what="The companies could not be read" />
      {companies === undefined && page.loading && <Loading />}
      {companies !== undefined && companies.length === 0 && <Empty>{name === '' ? 'There is no company yet.' : `No company's name contains "${name}".`}</Empty>}
      {companies !== undefined && companies.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {companies.map((company) => (
                <tr key={company.id}>
                  <th scope="row">
                    <Link to={`/companies/${company.id}`}>{company.name}</Link>
                  </th>
                  <td>
                    <Id value={company.id} label="company id" />
                  </td>
                  <td>
                    <Time iso={company.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Pager
        hasPrevious={after !== undefined}
        next={page.data?.next}
        onPrevious={() => navigate(withQuery('/companies', { query: name, after: trail.current.pop() }))}
        onNext={() => {
          if (after !== undefined) trail.current.push(after)
          navigate(withQuery('/companies', { query: name, after: page.data?.next ?? undefined }))
        }}
      />
      {may(session.role, 'admin') && <CreateCompany />}
    </>
  )
}

function CreateCompany() {
  const create = useAction((admin, name: string) => admin.createCompany({ name }))
  return (
    <form
      class="card narrow"
      aria-labelledby="create-company"
      onSubmit={async (event) => {
        event.preventDefault()
        const created = await create.run((new FormData(event.currentTarget as HTMLFormElement).get('name') as string).trim())
        if (created) navigate(`/companies/${created.id}`)
      }}
    >
      <h2 id="create-company">New company</h2>
      <label for="company-name">Name</label>
      <input id="company-name" name="name" required maxLength={200} autocomplete="off" />
      <Problem error={create.error} what="The company could not be created" />
      <button type="submit" disabled={create.running}>
        Create the company
      </button>
    </form>
  )
}
