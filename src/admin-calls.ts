/** The CLI's admin subcommands, each mapped to its call of the admin API (SPEC §4). */
export interface AdminCall {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  path: string
  body?: Record<string, unknown>
}

export type Flags = { name?: string; 'default-agent-id'?: string; active?: string; inactive?: boolean }

interface Command {
  /** the arguments after `chat-auth <group> <action>`, as the usage shows them */
  usage: string
  call(id: (what: string) => string, flags: Flags & { activeFlag(): boolean | undefined }): AdminCall
}

const defined = (body: Record<string, unknown>) => Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined))
const required = (value: string | undefined, what: string, command: string): string => {
  if (!value) throw new UsageError(`${command} needs ${what}`)
  return value
}

/** Every admin subcommand by group and action; the usage text is made from this table. */
const COMMANDS: Record<string, Record<string, Command>> = {
  companies: {
    create: { usage: '--name NAME', call: (_, f) => ({ method: 'POST', path: '/admin/v1/companies', body: { name: f.name } }) },
    get: { usage: 'COMPANY_ID', call: (id) => ({ method: 'GET', path: `/admin/v1/companies/${id('a company id')}` }) },
    update: {
      usage: 'COMPANY_ID [--name NAME] [--default-agent-id AGENT_ID]',
      call: (id, f) => ({ method: 'PATCH', path: `/admin/v1/companies/${id('a company id')}`, body: defined({ name: f.name, defaultAgentId: f['default-agent-id'] }) }),
    },
  },
  agents: {
    create: {
      usage: 'COMPANY_ID --name NAME [--inactive]',
      call: (id, f) => ({ method: 'POST', path: `/admin/v1/companies/${id('a company id')}/agents`, body: { name: f.name, active: !f.inactive } }),
    },
    update: {
      usage: 'AGENT_ID [--name NAME] [--active true|false]',
      call: (id, f) => ({ method: 'PATCH', path: `/admin/v1/agents/${id('an agent id')}`, body: defined({ name: f.name, active: f.activeFlag() }) }),
    },
  },
  'api-keys': {
    create: {
      usage: 'COMPANY_ID [--name NAME]',
      call: (id, f) => ({ method: 'POST', path: `/admin/v1/companies/${id('a company id')}/api-keys`, body: defined({ name: f.name }) }),
    },
    list: { usage: 'COMPANY_ID', call: (id) => ({ method: 'GET', path: `/admin/v1/companies/${id('a company id')}/api-keys` }) },
    revoke: { usage: 'KEY_ID', call: (id) => ({ method: 'DELETE', path: `/admin/v1/api-keys/${id('a key id')}` }) },
  },
  users: {
    get: { usage: 'CUSTOMER_USER_ID', call: (id) => ({ method: 'GET', path: `/admin/v1/customer-users/${id('a customer user id')}` }) },
    update: {
      usage: 'CUSTOMER_USER_ID --active true|false',
      call: (id, f) => {
        const path = `/admin/v1/customer-users/${id('a customer user id')}`
        const active = f.activeFlag()
        if (active === undefined) throw new UsageError('users update needs --active true|false')
        return { method: 'PATCH', path, body: { active } }
      },
    },
  },
}

/** Flags a command cannot do without (checked before the call is made). */
const REQUIRED_FLAGS: Record<string, keyof Flags> = { 'companies create': 'name', 'agents create': 'name' }

/** The usage lines of one group, or of every group. */
export function adminUsage(group?: string): string {
  const groups = group === undefined ? Object.keys(COMMANDS) : [group]
  return groups.flatMap((g) => Object.entries(COMMANDS[g] ?? {}).map(([action, c]) => `  chat-auth ${g} ${action} ${c.usage}`)).join('\n') + '\n'
}

export function isAdminGroup(group: string): boolean {
  return Object.hasOwn(COMMANDS, group)
}

/** Maps `group action [id] --flags` to the admin API call of SPEC §4. */
export function adminCall(group: string, action: string, id: string | undefined, flags: Flags): AdminCall {
  const actions = Object.hasOwn(COMMANDS, group) ? COMMANDS[group]! : undefined
  if (actions === undefined) throw new UsageError(`unknown command: ${[group, action].filter(Boolean).join(' ')}`)
  if (!action) throw new UsageError(`${group} needs an action: ${Object.keys(actions).join(', ')}`, group)
  const command = Object.hasOwn(actions, action) ? actions[action]! : undefined
  if (command === undefined) throw new UsageError(`${group} has no action "${action}"`, group)
  const name = `${group} ${action}`
  const flag = REQUIRED_FLAGS[name]
  if (flag !== undefined) required(flags[flag] as string | undefined, `--${flag}`, name)
  const activeFlag = (): boolean | undefined => {
    if (flags.active === undefined) return undefined
    if (flags.active !== 'true' && flags.active !== 'false') throw new UsageError('--active takes true or false')
    return flags.active === 'true'
  }
  return command.call((what) => encodeURIComponent(required(id, what, name)), { ...flags, activeFlag })
}

/** A command line the CLI cannot run; `group` narrows the usage shown with it. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly group?: string,
  ) {
    super(message)
  }
}
