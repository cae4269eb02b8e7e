import { useState } from 'preact/hooks'
import type { CreatedWebhook, EventType, Webhook } from '../../../src/client/index.js'
import { useAction, useConsole, useLoad } from '../api.js'
import { may } from '../session.js'
import { Empty, Id, Loading, Problem, SecretOnce, Time } from '../ui.js'

const EVENT_TYPES: EventType[] = [
  'tokens.invalidated',
  'token.revoked',
  'company.tokens_revoked',
  'agent.tokens_revoked',
  'user.activated',
  'user.deactivated',
  'agent.activated',
  'agent.deactivated',
  'api_key.created',
  'api_key.revoked',
]

/** The company's webhooks (SPEC §9.3): create (secret once) and delete (admin); deliveries, redeliver (operator). */
export function Webhooks({ companyId }: { companyId: string }) {
  const { session } = useConsole()
  const hooks = useLoad((admin) => admin.listWebhooks(companyId), `webhooks:${companyId}`)
  const [created, setCreated] = useState<CreatedWebhook | undefined>()
  return (
    <section aria-labelledby="webhooks">
      <h2 id="webhooks">Webhooks</h2>
      <Problem error={hooks.error} what="The webhooks could not be read" />
      {created && <SecretOnce label={`Signing secret of ${created.url}`} value={created.secret} onDone={() => setCreated(undefined)} />}
      {hooks.data === undefined && hooks.loading && <Loading />}
      {hooks.data !== undefined && hooks.data.length === 0 && <Empty>The company has no webhook endpoint.</Empty>}
      {hooks.data?.map((hook) => <WebhookCard key={hook.id} hook={hook} onDeleted={hooks.reload} />)}
      {may(session.role, 'admin') && (
        <CreateWebhook
          companyId={companyId}
          onCreated={(hook) => {
            setCreated(hook)
            hooks.reload()
          }}
        />
      )}
    </section>
  )
}

function WebhookCard({ hook, onDeleted }: { hook: Webhook; onDeleted: () => void }) {
  const { session } = useConsole()
  const [showing, setShowing] = useState(false)
  const remove = useAction((admin) => admin.deleteWebhook(hook.id))
  return (
    <article class="card webhook" aria-label={`Webhook ${hook.url}`}>
      <header>
        <code class="url">{hook.url}</code>
        <span class="muted">{hook.types === null ? 'every event type' : hook.types.join(', ')}</span>
      </header>
      <p class="small">
        <Id value={hook.id} label="webhook id" short /> · created <Time iso={hook.createdAt} />
      </p>
      <div class="action-row">
        <button type="button" aria-expanded={showing} onClick={() => setShowing(!showing)}>
          {showing ? 'Hide deliveries' : 'Show deliveries'}
        </button>
        {may(session.role, 'admin') && (
          <button type="button" class="danger" disabled={remove.running} onClick={async () => (await remove.run()) && onDeleted()}>
            Delete webhook
          </button>
        )}
      </div>
      <Problem error={remove.error} what="The webhook could not be deleted" />
      {showing && <Deliveries webhookId={hook.id} />}
    </article>
  )
}

function Deliveries({ webhookId }: { webhookId: string }) {
  const { session } = useConsole()
  const deliveries = useLoad((admin) => admin.listWebhookDeliveries(webhookId, { limit: 50 }), `deliveries:${webhookId}`, 5000)
  const redeliver = useAction((admin, deliveryId: string) => admin.redeliver(deliveryId))
  const operator = may(session.role, 'operator')
  if (deliveries.data === undefined) return deliveries.loading ? <Loading /> : <Problem error={deliveries.error} what="The deliveries could not be read" />
  if (deliveries.data.length === 0) return <Empty>Nothing delivered yet.</Empty>
  return (
    <div class="table-wrap">
      <table class="deliveries">
        <thead>
          <tr>
            <th scope="col">Event</th>
            <th scope="col">Status</th>
            <th scope="col">Attempts</th>
            <th scope="col">Last attempt</th>
            <th scope="col">Answer</th>
            <th scope="col">Next attempt</th>
            {operator && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {deliveries.data.map((delivery) => (
            <tr key={delivery.deliveryId}>
              <td>
                <code title={delivery.eventId}>{delivery.eventType}</code>
              </td>
              <td>
                <span class={`badge status-${delivery.status}`}>{delivery.status}</span>
              </td>
              <td class="number">{delivery.attempt}</td>
              <td>
                <Time iso={delivery.at} />
              </td>
              <td>{delivery.responseStatus ?? delivery.error ?? <span class="muted">—</span>}</td>
              <td>
                <Time iso={delivery.nextAttemptAt} />
              </td>
              {operator && (
                <td>
                  <button type="button" disabled={redeliver.running} onClick={async () => (await redeliver.run(delivery.deliveryId)) && deliveries.reload()}>
                    Redeliver
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      <Problem error={redeliver.error} what="The redelivery failed" />
    </div>
  )
}

function CreateWebhook({ companyId, onCreated }: { companyId: string; onCreated: (hook: CreatedWebhook) => void }) {
  const create = useAction((admin, url: string, types: EventType[] | undefined) => admin.createWebhook(companyId, types === undefined ? { url } : { url, types }))
  return (
    <form
      class="card"
      aria-labelledby="create-webhook"
      onSubmit={async (event) => {
        event.preventDefault()
        const form = event.currentTarget as HTMLFormElement
        const data = new FormData(form)
        const types = data.getAll('types') as EventType[]
        const hook = await create.run((data.get('url') as string).trim(), types.length === 0 ? undefined : types)
        if (hook) {
          form.reset()
          onCreated(hook)
        }
      }}
    >
      <h3 id="create-webhook">New webhook endpoint</h3>
      <label for="webhook-url">URL (https, a public address)</label>
      <input id="webhook-url" name="url" type="url" required autocomplete="off" placeholder="https://example.com/hooks/chat-auth" />
      <fieldset>
        <legend>Event types (none checked: every type)</legend>
        <div class="checks">
          {EVENT_TYPES.map((type) => (
            <label key={type} class="check">
              <input type="checkbox" name="types" value={type} /> {type}
            </label>
          ))}
        </div>
      </fieldset>
      <Problem error={create.error} what="The webhook could not be created" />
      <button type="submit" disabled={create.running}>
        Create the webhook
      </button>
    </form>
  )
}
