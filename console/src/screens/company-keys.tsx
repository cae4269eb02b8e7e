import { useState } from 'preact/hooks'
import type { CreatedApiKey } from '../../../src/client/index.js'
import { useAction, useConsole, useLoad } from '../api.js'
import { may } from '../session.js'
import { Empty, Id, Loading, Problem, SecretOnce, Time } from '../ui.js'

/** The company's API keys: create (the secret shown once), revoke, last used (admin writes). */
export function ApiKeys({ companyId }: { companyId: string }) {
  const { session } = useConsole()
  const keys = useLoad((admin) => admin.listApiKeys(companyId), `keys:${companyId}`)
  const create = useAction((admin, name: string) => admin.createApiKey(companyId, name === '' ? {} : { name }))
  const revoke = useAction((admin, keyId: string) => admin.revokeApiKey(keyId))
  const [created, setCreated] = useState<CreatedApiKey | undefined>()
  const admin = may(session.role, 'admin')
  return (
    <section aria-labelledby="api-keys">
      <h2 id="api-keys">API keys</h2>
      <Problem error={keys.error} what="The API keys could not be read" />
      {created && <SecretOnce label={`Secret of key ${created.keyId}`} value={created.keySecret} onDone={() => setCreated(undefined)} />}
      {keys.data === undefined && keys.loading && <Loading />}
      {keys.data !== undefined && keys.data.length === 0 && <Empty>The company has no API key.</Empty>}
      {keys.data !== undefined && keys.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Key id</th>
                <th scope="col">Name</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Revoked</th>
                {admin && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {keys.data.map((key) => (
                <tr key={key.keyId} class={key.revokedAt === null ? undefined : 'revoked'}>
                  <th scope="row">
                    <Id value={key.keyId} label={`key id ${key.keyId}`} />
                  </th>
                  <td>{key.name ?? <span class="muted">—</span>}</td>
                  <td>
                    <Time iso={key.createdAt} />
                  </td>
                  <td>{key.lastUsedAt === null ? <span class="muted">never</span> : <Time iso={key.lastUsedAt} />}</td>
                  <td>{key.revokedAt === null ? <span class="muted">live</span> : <Time iso={key.revokedAt} />}</td>
                  {admin && (
                    <td>
                      {key.revokedAt === null && (
                        <button type="button" class="danger" aria-label={`Revoke key ${key.keyId}`} disabled={revoke.running} onClick={async () => (await revoke.run(key.keyId)) && keys.reload()}>
                          Revoke
                        </button>
                      )}
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Problem error={revoke.error} what="The key could not be revoked" />
      {admin && (
        <form
          class="inline-form"
          onSubmit={async (event) => {
            event.preventDefault()
            const form = event.currentTarget as HTMLFormElement
            const key = await create.run((new FormData(form).get('name') as string).trim())
            if (key) {
              form.reset()
              setCreated(key)
              keys.reload()
            }
          }}
        >
          <label for="key-name">New key's name (optional)</label>
          <input id="key-name" name="name" maxLength={200} autocomplete="off" />
          <button type="submit" disabled={create.running}>
            Create an API key
          </button>
          <Problem error={create.error} what="The key could not be created" />
        </form>
      )}
    </section>
  )
}
