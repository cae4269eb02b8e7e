import { useEffect, useState } from 'preact/hooks'
import type { AuditEvent } from '../../../src/client/index.js'
import { useAction, useConsole, useLoad } from '../api.js'
import { ReceiptView, type Receipt } from '../receipt.js'
import { may } from '../session.js'
import { EventTable } from './events.js'
import { Empty, Id, Link, Loading, Problem, Time, Yes } from '../ui.js'

/** What the last action did, with its receipt. */
interface Done {
  what: string
  at: string
  receipt: Receipt | null
}

/** SPEC §10.3: the user's fields, its recent events, and the actions the role allows. */
export function UserPage({ id }: { id: string }) {
  const { session } = useConsole()
  const user = useLoad((admin) => admin.getCustomerUser(id), `user:${id}`)
  const [done, setDone] = useState<Done | undefined>()
  useEffect(() => void (document.title = `User ${user.data?.externalId ?? id} · chat-auth console`), [user.data, id])
  const after = (what: string, receipt: Receipt | null) => {
    setDone({ what, at: new Date().toISOString(), receipt })
    user.reload()
  }

  if (user.data === undefined) {
    return (
      <>
        <h1 tabIndex={-1}>User</h1>
        {user.loading ? <Loading /> : <Problem error={user.error} what="The user could not be read" />}
        <p>
          <Link to="/users">Find another user</Link>
        </p>
      </>
    )
  }
  const u = user.data
  return (
    <>
      <h1 tabIndex={-1}>
        User <span class="subtitle">{u.externalId}</span>
      </h1>
      <dl class="fields">
        <dt>customerUserId</dt>
        <dd>
          <Id value={u.id} label="customerUserId" />
        </dd>
        <dt>External id</dt>
        <dd>
          <Id value={u.externalId} label="external id" />
        </dd>
        <dt>Company</dt>
        <dd>
          <Link to={`/companies/${u.companyId}`}>
            <code>{u.companyId}</code>
          </Link>
        </dd>
        <dt>Agent</dt>
        <dd>
          <Id value={u.agentId} label="agent id" />
        </dd>
        <dt>tokenVersion</dt>
        <dd class="number" data-field="tokenVersion">
          {u.tokenVersion}
        </dd>
        <dt>Active</dt>
        <dd>
          <Yes value={u.active} yes="active" no="deactivated" />
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={u.createdAt} />
        </dd>
      </dl>
      {may(session.role, 'operator') && <UserActions id={u.id} active={u.active} onDone={after} />}
      {done && (
        <div class="done" aria-live="polite">
          <p role="status">
            <strong>{done.what}</strong> at <Time iso={done.at} />.
          </p>
          <ReceiptView receipt={done.receipt} />
        </div>
      )}
      <RecentEvents companyId={u.companyId} userId={u.id} version={`${u.tokenVersion}:${u.active}:${done?.at ?? ""}`} />
    </>
  )
}

function UserActions({ id, active, onDone }: { id: string; active: boolean; onDone: (what: string, receipt: Receipt | null) => void }) {
  const invalidate = useAction((admin) => admin.invalidateUser(id))
  const revoke = useAction((admin, token: string) => admin.revokeToken(token))
  const toggle = useAction((admin, next: boolean) => admin.updateCustomerUser(id, { active: next }))
  const [token, setToken] = useState('')
  return (
    <section class="actions-panel" aria-labelledby="user-actions">
      <h2 id="user-actions">Actions</h2>
      <div class="action-row">
        <button
          type="button"
          class="danger"
          disabled={invalidate.running}
          onClick={async () => {
            const answer = await invalidate.run()
            if (answer) onDone(`Every token revoked (tokenVersion ${answer.newTokenVersion})`, answer.receipt)
          }}
        >
          {invalidate.running ? 'Revoking…' : 'Revoke all tokens'}
        </button>
        <button
          type="button"
          disabled={toggle.running}
          onClick={async () => {
            const answer = await toggle.run(!active)
            if (answer) onDone(active ? 'User deactivated' : 'User reactivated', answer.receipt)
          }}
        >
          {active ? 'Deactivate' : 'Reactivate'}
        </button>
      </div>
      <Problem error={invalidate.error} what="Revoking every token failed" />
      <Problem error={toggle.error} what="The change failed" />
      <form
        class="inline-form"
        onSubmit={async (event) => {
          event.preventDefault()
          const answer = await revoke.run(token.trim())
          if (answer) {
            setToken('')
            onDone(answer.receipt === null ? 'That token was already expired or revoked' : `Token ${answer.jti} revoked`, answer.receipt)
          }
        }}
      >
        <label for="revoke-token">Revoke one token (paste it)</label>
        <textarea id="revoke-token" rows={2} spellcheck={false} autocomplete="off" required value={token} onInput={(event) => setToken(event.currentTarget.value)} />
        <button type="submit" disabled={revoke.running || token.trim() === ''}>
          {revoke.running ? 'Revoking…' : 'Revoke this token'}
        </button>
      </form>
      <Problem error={revoke.error} what="Revoking the token failed" />
    </section>
  )
}

/** The user's events among the company's latest (the listing is per company, newest first). */
function RecentEvents({ companyId, userId, version }: { companyId: string; userId: string; version: string }) {
  const events = useLoad((admin) => admin.listEvents(companyId, { limit: 500 }), `events:${companyId}:${version}`)
  const mine = events.data?.events.filter((event: AuditEvent) => event.subject.id === userId)
  return (
    <section aria-labelledby="user-events">
      <h2 id="user-events">Recent events</h2>
      <Problem error={events.error} what="The events could not be read" />
      {mine === undefined && events.loading && <Loading />}
      {mine !== undefined && mine.length === 0 && <Empty>No event about this user among the company's latest 500.</Empty>}
      {mine !== undefined && mine.length > 0 && <EventTable events={mine} />}
    </section>
  )
}
