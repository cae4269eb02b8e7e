import { useEffect } from 'preact/hooks'
import { useConsole, useLoad } from '../api.js'
import { RevokeWithPreview } from '../revoke-with-preview.js'
import { navigate, withQuery } from '../router.js'
import { may } from '../session.js'
import { Id, Link, Loading, Problem, Time } from '../ui.js'
import { Agents } from './company-agents.js'
import { ApiKeys } from './company-keys.js'
import { Webhooks } from './company-webhooks.js'
import { LiveEvents } from './events.js'
import { ByExternalId } from './find-user.js'

/** SPEC §10.3 "Company": its agents, API keys, webhooks, a company-wide revocation and its events live. */
export function CompanyPage({ id, query }: { id: string; query: URLSearchParams }) {
  const { session } = useConsole()
  const company = useLoad((admin) => admin.getCompany(id), `company:${id}`)
  useEffect(() => void (document.title = `${company.data?.name ?? 'Company'} · chat-auth console`), [company.data])
  if (company.data === undefined) {
    return (
      <>
        <h1 tabIndex={-1}>Company</h1>
        {company.loading ? <Loading /> : <Problem error={company.error} what="The company could not be read" />}
        <p>
          <Link to="/companies">Search the companies</Link>
        </p>
      </>
    )
  }
  const c = company.data
  const type = query.get('type') ?? ''
  const actor = query.get('actor') ?? ''
  return (
    <>
      <h1 tabIndex={-1}>
        {c.name} <span class="subtitle">company</span>
      </h1>
      <dl class="fields">
        <dt>Company id</dt>
        <dd>
          <Id value={c.id} label="company id" />
        </dd>
        <dt>Default agent</dt>
        <dd>{c.defaultAgentId === null ? <span class="muted">none</span> : <Id value={c.defaultAgentId} label="default agent id" />}</dd>
        <dt>Created</dt>
        <dd>
          <Time iso={c.createdAt} />
        </dd>
      </dl>
      {may(session.role, 'operator') && (
        <RevokeWithPreview
          label="Revoke every token of the company…"
          subject={c.name}
          preview={(admin) => admin.previewCompanyRevocation(c.id)}
          revoke={(admin) => admin.revokeCompanyTokens(c.id)}
        />
      )}
      <ByExternalId companyId={c.id} externalId="" fixedCompany title="Find a user of this company" />
      <Agents companyId={c.id} />
      <ApiKeys companyId={c.id} />
      <Webhooks companyId={c.id} />
      <LiveEvents companyId={c.id} type={type} actor={actor} onFilter={(filter) => navigate(withQuery(`/companies/${c.id}`, filter), { replace: true })} />
    </>
  )
}
