import { useState } from 'preact/hooks'
import type { Agent } from '../../../src/client/index.js'
import { useAction, useConsole, useLoad } from '../api.js'
import { ReceiptView, type Receipt } from '../receipt.js'
import { RevokeWithPreview } from '../revoke-with-preview.js'
import { may } from '../session.js'
import { Empty, Id, Loading, Problem, Time, Yes } from '../ui.js'

/** The company's agents: (de)activate and revoke their tokens (operator), create (admin). */
export function Agents({ companyId }: { companyId: string }) {
  const { session } = useConsole()
  const agents = useLoad((admin) => admin.listAgents(companyId), `agents:${companyId}`)
  const [receipt, setReceipt] = useState<{ what: string; receipt: Receipt | null } | undefined>()
  return (
    <section aria-labelledby="agents">
      <h2 id="agents">Agents</h2>
      <Problem error={agents.error} what="The agents could not be read" />
      {agents.data === undefined && agents.loading && <Loading />}
      {agents.data !== undefined && agents.data.length === 0 && <Empty>The company has no agent yet.</Empty>}
      {agents.data !== undefined && agents.data.length > 0 && (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Active</th>
                <th scope="col">Created</th>
                {may(session.role, 'operator') && <th scope="col">Actions</th>}
              </tr>
            </thead>
            <tbody>
              {agents.data.map((agent) => (
                <AgentRow
                  key={agent.id}
                  agent={agent}
                  onChanged={(what, receipt) => {
                    setReceipt({ what, receipt })
                    agents.reload()
                  }}
                />
              ))}
            </tbody>
          </table>
        </div>
      )}
      {receipt && (
        <div class="done" aria-live="polite">
          <p role="status">
            <strong>{receipt.what}</strong>
          </p>
          <ReceiptView receipt={receipt.receipt} />
        </div>
      )}
      {may(session.role, 'admin') && <CreateAgent companyId={companyId} onCreated={agents.reload} />}
    </section>
  )
}

function AgentRow({ agent, onChanged }: { agent: Agent; onChanged: (what: string, receipt: Receipt | null) => void }) {
  const { session } = useConsole()
  const toggle = useAction((admin) => admin.updateAgent(agent.id, { active: !agent.active }))
  return (
    <tr>
      <th scope="row">{agent.name}</th>
      <td>
        <Id value={agent.id} label={`id of agent ${agent.name}`} short />
      </td>
      <td>
        <Yes value={agent.active} yes="active" no="deactivated" />
      </td>
      <td>
        <Time iso={agent.createdAt} />
      </td>
      {may(session.role, 'operator') && (
        <td class="row-actions">
          <button
            type="button"
            disabled={toggle.running}
            onClick={async () => {
              const answer = await toggle.run()
              if (answer) onChanged(`Agent ${agent.name} ${agent.active ? 'deactivated' : 'activated'}`, answer.receipt)
            }}
          >
            {agent.active ? 'Deactivate' : 'Activate'}
          </button>
          <RevokeWithPreview label="Revoke its tokens…" subject={`agent ${agent.name}`} preview={(admin) => admin.previewAgentRevocation(agent.id)} revoke={(admin) => admin.revokeAgentTokens(agent.id)} />
          <Problem error={toggle.error} what="The change failed" />
        </td>
      )}
    </tr>
  )
}

function CreateAgent({ companyId, onCreated }: { companyId: string; onCreated: () => void }) {
  const create = useAction((admin, name: string) => admin.createAgent(companyId, { name }))
  return (
    <form
      class="inline-form"
      onSubmit={async (event) => {
        event.preventDefault()
        const form = event.currentTarget as HTMLFormElement
        if (await create.run((new FormData(form).get('name') as string).trim())) {
          form.reset()
          onCreated()
        }
      }}
    >
      <label for="agent-name">New agent's name</label>
      <input id="agent-name" name="name" required maxLength={200} autocomplete="off" />
      <button type="submit" disabled={create.running}>
        Create the agent
      </button>
      <Problem error={create.error} what="The agent could not be created" />
    </form>
  )
}
