import { useEffect, useState } from 'preact/hooks'
import { useAction, useLoad } from '../api.js'
import type { Operator } from '../../../src/client/index.js'
import { Confirm, Empty, Id, Loading, Problem, SecretOnce, Time } from '../ui.js'

const ROLES = [
  { role: 'viewer', says: 'reads everything, changes nothing' },
  { role: 'operator', says: 'a viewer who may also revoke, (de)activate users and agents, and redeliver webhooks' },
  { role: 'admin', says: 'everything: companies, agents, API keys, webhooks and operators' },
] as const

/** SPEC §10.1 (admin): operators with names and roles; a token shown once; revoked at once on every node. */
export function Operators() {
  useEffect(() => void (document.title = 'Operators · chat-auth console'), [])
  const operators = useLoad((admin) => admin.listOperators(), 'operators')
  const create = useAction((admin, name: string, role: Operator['role']) => admin.createOperator({ name, role }))
  const revoke = useAction((admin, id: string) => admin.revokeOperator(id))
  const [created, setCreated] = useState<{ name: string; token: string } | undefined>()
  const [revoking, setRevoking] = useState<Operator | undefined>()
  return (
    <>
      <h1 tabIndex={-1}>Operators</h1>
      <form
        class="card narrow"
        aria-labelledby="create-operator"
        onSubmit={async (event) => {
          event.preventDefault()
          const form = event.currentTarget as HTMLFormElement
          const data = new FormData(form)
          const operator = await create.run((data.get('name') as string).trim(), data.get('role') as Operator['role'])
          if (operator) {
            form.reset()
            setCreated({ name: operator.name, token: operator.token })
            operators.reload()
          }
        }}
      >
        <h2 id="create-operator">New operator</h2>
        <label for="operator-name">Name</label>
        <input id="operator-name" name="name" required maxLength={200} autocomplete="off" />
        <label for="operator-role">Role</label>
        <select id="operator-role" name="role">
          {ROLES.map(({ role, says }) => (
            <option key={role} value={role}>
              {role} — {says}
            </option>
          ))}
        </select>
        <Problem error={create.error} what="The operator could not be created" />
        <button type="submit" class="primary" disabled={create.running}>
          Create the operator
        </button>
      </form>
      {created && <SecretOnce label={`Token of ${created.name}`} value={created.token} onDone={() => setCreated(undefined)} />}
      <Problem error={operators.error} what="The operators could not be read" />
      <Problem error={revoke.error} what="The operator could not be revoked" />
      {operators.data === undefined && operators.loading && <Loading />}
      {operators.data !== undefined && operators.data.length === 0 && <Empty>No operator yet: everyone signs in with ADMIN_TOKEN.</Empty>}
      {operators.data !== undefined && operators.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Id</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Revoked</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {operators.data.map((operator) => (
                <tr key={operator.id} class={operator.revokedAt === null ? undefined : 'revoked'}>
                  <th scope="row">{operator.name}</th>
                  <td>
                    <span class={`badge role-${operator.role}`}>{operator.role}</span>
                  </td>
                  <td>
                    <Id value={operator.id} label={`id of operator ${operator.name}`} short />
                  </td>
                  <td>
                    <Time iso={operator.createdAt} />
                  </td>
                  <td>{operator.lastUsedAt === null ? <span class="muted">never</span> : <Time iso={operator.lastUsedAt} />}</td>
                  <td>{operator.revokedAt === null ? <span class="muted">live</span> : <Time iso={operator.revokedAt} />}</td>
                  <td>
                    {operator.revokedAt === null && (
                      <button type="button" class="danger" onClick={() => setRevoking(operator)}>
                        Revoke {operator.name}
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <Confirm
        open={revoking !== undefined}
        title={`Revoke operator ${revoking?.name ?? ''}?`}
        confirmLabel="Revoke the operator"
        onCancel={() => setRevoking(undefined)}
        onConfirm={async () => {
          const id = revoking!.id
          setRevoking(undefined)
          if (await revoke.run(id)) operators.reload()
        }}
      >
        <p>Their token stops working on every node at once, and their console sessions end.</p>
      </Confirm>
    </>
  )
}
