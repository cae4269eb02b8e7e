/** The CLI's admin subcommands, each mapped to its call of the admin API (SPEC §4). */
export interface AdminCall {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  body?: Record<string, unknown>
}

export type Flags = { name?: string; 'default-agent-id'?: string; active?: string; inactive?: boolean }

/** Maps `resource action [id] --flags` to the admin API call of SPEC §4. */
export function adminCall(resource: string, action: string, id: string | undefined, flags: Flags): AdminCall {
  const need = (value: string | undefined, what: string): string => {
    if (!value) throw new UsageError(`${resource} ${action} needs ${what}`)
    return encodeURIComponent(value)
  }
  const active = (): boolean | undefined => {
    if (flags.active === undefined) return undefined
    if (flags.active !== 'true' && flags.active !== 'false') throw new UsageError('--active takes true or false')
    return flags.active === 'true'
  }
  const defined = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined))
  switch (`${resource} ${action}`) {
    case 'companies create':
      return { method: 'POST', path: '/admin/v1/companies', body: { name: need(flags.name, '--name') && flags.name } }
    case 'companies get':
      return { method: 'GET', path: `/admin/v1/companies/${need(id, 'a company id')}` }
    case 'companies update':
      return { method: 'PATCH', path: `/admin/v1/companies/${need(id, 'a company id')}`, body: defined({ name: flags.name, defaultAgentId: flags['default-agent-id'] }) }
    case 'agents create':
      return { method: 'POST', path: `/admin/v1/companies/${need(id, 'a company id')}/agents`, body: { name: need(flags.name, '--name') && flags.name, active: !flags.inactive } }
    case 'agents update':
      return { method: 'PATCH', path: `/admin/v1/agents/${need(id, 'an agent id')}`, body: defined({ name: flags.name, active: active() }) }
    case 'api-keys create':
      return { method: 'POST', path: `/admin/v1/companies/${need(id, 'a company id')}/api-keys`, body: defined({ name: flags.name }) }
    case 'api-keys list':
      return { method: 'GET', path: `/admin/v1/companies/${need(id, 'a company id')}/api-keys` }
    case 'api-keys revoke':
      return { method: 'DELETE', path: `/admin/v1/api-keys/${need(id, 'a key id')}` }
    case 'users get':
      return { method: 'GET', path: `/admin/v1/customer-users/${need(id, 'a customer user id')}` }
    case 'users update': {
      const value = active()
      if (value === undefined) throw new UsageError('users update needs --active true|false')
      return { method: 'PATCH', path: `/admin/v1/customer-users/${need(id, 'a customer user id')}`, body: { active: value } }
    }
  }
  throw new UsageError(`unknown command: ${resource} ${action}`)
}

export class UsageError extends Error {}

