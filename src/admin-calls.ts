import type { AdminClient, EventType, Role } from './client/index.js'

/** The admin client's calls (its `events` generator aside: the CLI lists one page). */
type AdminMethod = Exclude<keyof AdminClient, 'events'>

/** The CLI's admin subcommands, each mapped to one call of the typed client (SPEC §4, §7.1, §7.2, §9.3). */
export type AdminCall = { [M in AdminMethod]: { call: M; args: Parameters<AdminClient[M]> } }[AdminMethod]

export type Flags = {
  name?: string
  'default-agent-id'?: string
  active?: string
  inactive?: boolean
  limit?: string
  before?: string
  after?: string
  endpoint?: string
  types?: string
  role?: string
  query?: string
  'company-id'?: string
  'external-id'?: string
}

interface Command {
  /** the arguments after `chat-auth <group> <action>`, as the usage shows them */
  usage: string
  call(id: (what: string) => string, flags: Flags & { activeFlag(): boolean | undefined; limitFlag(): number | undefined }): AdminCall
}

const defined = <T extends Record<string, unknown>>(body: T): T => Object.fromEntries(Object.entries(body).filter(([, v]) => v !== undefined)) as T
const required = (value: string | undefined, what: string, command: string): string => {
  if (!value) throw new UsageError(`${command} needs ${what}`)
  return value
}

/** Every admin subcommand by group and action; the usage text is made from this table. */
const COMMANDS: Record<string, Record<string, Command>> = {
  companies: {
    create: { usage: '--name NAME', call: (_, f) => ({ call: 'createCompany', args: [{ name: f.name! }] }) },
    get: { usage: 'COMPANY_ID', call: (id) => ({ call: 'getCompany', args: [id('a company id')] }) },
    update: {
      usage: 'COMPANY_ID [--name NAME] [--default-agent-id AGENT_ID]',
      call: (id, f) => ({ call: 'updateCompany', args: [id('a company id'), defined({ name: f.name, defaultAgentId: f['default-agent-id'] })] }),
    },
    'revoke-tokens': { usage: 'COMPANY_ID   (every token of the company issued so far)', call: (id) => ({ call: 'revokeCompanyTokens', args: [id('a company id')] }) },
    'preview-revoke': { usage: 'COMPANY_ID   (the active users and open sessions revoke-tokens would end)', call: (id) => ({ call: 'previewCompanyRevocation', args: [id('a company id')] }) },
    search: {
      usage: '[--query TEXT] [--limit 1-100] [--after CURSOR]   (by name, any case; "next" is the next page\'s --after)',
      call: (_, f) => ({ call: 'searchCompanies', args: [defined({ query: f.query, limit: f.limitFlag(), after: f.after })] }),
    },
  },
  agents: {
    create: {
      usage: 'COMPANY_ID --name NAME [--inactive]',
      call: (id, f) => ({ call: 'createAgent', args: [id('a company id'), { name: f.name!, active: !f.inactive }] }),
    },
    update: {
      usage: 'AGENT_ID [--name NAME] [--active true|false]',
      call: (id, f) => ({ call: 'updateAgent', args: [id('an agent id'), defined({ name: f.name, active: f.activeFlag() })] }),
    },
    'revoke-tokens': { usage: 'AGENT_ID   (every token of the agent issued so far)', call: (id) => ({ call: 'revokeAgentTokens', args: [id('an agent id')] }) },
    'preview-revoke': { usage: 'AGENT_ID   (the active users and open sessions revoke-tokens would end)', call: (id) => ({ call: 'previewAgentRevocation', args: [id('an agent id')] }) },
  },
  'api-keys': {
    create: { usage: 'COMPANY_ID [--name NAME]', call: (id, f) => ({ call: 'createApiKey', args: [id('a company id'), defined({ name: f.name })] }) },
    list: { usage: 'COMPANY_ID', call: (id) => ({ call: 'listApiKeys', args: [id('a company id')] }) },
    revoke: { usage: 'KEY_ID', call: (id) => ({ call: 'revokeApiKey', args: [id('a key id')] }) },
  },
  users: {
    get: { usage: 'CUSTOMER_USER_ID', call: (id) => ({ call: 'getCustomerUser', args: [id('a customer user id')] }) },
    find: { usage: '--company-id COMPANY_ID --external-id EXTERNAL_ID   (the user by your customer\'s id of it)', call: (_, f) => ({ call: 'findCustomerUser', args: [f['company-id']!, f['external-id']!] }) },
    invalidate: { usage: 'CUSTOMER_USER_ID   (every token of the user issued so far)', call: (id) => ({ call: 'invalidateUser', args: [id('a customer user id')] }) },
    update: {
      usage: 'CUSTOMER_USER_ID --active true|false',
      call: (id, f) => {
        const customerUserId = id('a customer user id')
        const active = f.activeFlag()
        if (active === undefined) throw new UsageError('users update needs --active true|false')
        return { call: 'updateCustomerUser', args: [customerUserId, { active }] }
      },
    },
  },
  webhooks: {
    create: {
      usage: 'COMPANY_ID --endpoint URL [--types TYPE,TYPE…]   (the answer\'s secret is shown once)',
      call: (id, f) => ({ call: 'createWebhook', args: [id('a company id'), defined({ url: f.endpoint!, types: f.types?.split(',') as EventType[] | undefined })] }),
    },
    list: { usage: 'COMPANY_ID', call: (id) => ({ call: 'listWebhooks', args: [id('a company id')] }) },
    delete: { usage: 'WEBHOOK_ID', call: (id) => ({ call: 'deleteWebhook', args: [id('a webhook id')] }) },
    redeliver: { usage: 'DELIVERY_ID   (that event again, to that endpoint, now)', call: (id) => ({ call: 'redeliver', args: [id('a delivery id')] }) },
    deliveries: {
      usage: 'WEBHOOK_ID [--limit 1-500]   (the latest, newest event first)',
      call: (id, f) => ({ call: 'listWebhookDeliveries', args: [id('a webhook id'), defined({ limit: f.limitFlag() })] }),
    },
  },
  tokens: {
    revoke: { usage: 'TOKEN|-   (any company\'s token; - reads it from standard input, which no other user of the machine sees)', call: (id) => ({ call: 'revokeToken', args: [id('a token, or - to read it from standard input')] }) },
  },
  operators: {
    create: {
      usage: '--name NAME --role viewer|operator|admin   (the answer\'s token is shown once)',
      call: (_, f) => {
        if (f.role !== 'viewer' && f.role !== 'operator' && f.role !== 'admin') throw new UsageError('--role takes viewer, operator or admin', 'operators')
        return { call: 'createOperator', args: [{ name: f.name!, role: f.role as Role }] }
      },
    },
    list: { usage: '', call: () => ({ call: 'listOperators', args: [] }) },
    revoke: { usage: 'OPERATOR_ID   (its token and console sessions end on every node)', call: (id) => ({ call: 'revokeOperator', args: [id('an operator id')] }) },
  },
  nodes: {
    list: { usage: '', call: () => ({ call: 'listNodes', args: [] }) },
  },
  events: {
    list: {
      usage: 'COMPANY_ID [--limit 1-500] [--before CURSOR]   (newest first; "next" is the next page\'s --before)',
      call: (id, f) => ({ call: 'listEvents', args: [id('a company id'), defined({ limit: f.limitFlag(), before: f.before })] }),
    },
  },
}

/**
 * A write whose answer did not come, or came as 502/503/504, may still have been applied (a
 * 503 from a write often means "committed, but not every node could be told yet"). For each
 * write: how to see whether it was, and whether running it again is harmless. Reads: none.
 */
export function howToCheckWrite({ call, args }: AdminCall): string | undefined {
  const events = (companyId: string, type: string) => `run "chat-auth events list ${companyId}" and look for a new ${type} event`
  const repeatSafe = 'running it again is harmless: it sets the same values'
  switch (call) {
    case 'createCompany':
      return `no call lists companies by name: look for a company named "${args[0].name}" in your records before you run it again, which would make a second one`
    case 'updateCompany':
      return `run "chat-auth companies get ${args[0]}" to see its values; ${repeatSafe}`
    case 'revokeCompanyTokens':
      return `${events(args[0], 'company.tokens_revoked')}; running it again would also revoke the tokens issued since`
    case 'createAgent':
      return `no call lists agents: running it again may make a second agent in company ${args[0]}; "chat-auth companies get ${args[0]}" shows its default agent`
    case 'updateAgent':
      return `a change of active shows as agent.activated or agent.deactivated in "chat-auth events list <its company id>"; ${repeatSafe}`
    case 'revokeAgentTokens':
      return `run "chat-auth events list <its company id>" and look for a new agent.tokens_revoked event of agent ${args[0]}; running it again would also revoke the tokens issued since`
    case 'createApiKey':
      return `run "chat-auth api-keys list ${args[0]}": a new key there whose secret you never saw was created by this call; revoke it with "chat-auth api-keys revoke KEY_ID" and create another`
    case 'revokeApiKey':
      return 'running it again is harmless: a revoked key answers with its revocation time'
    case 'updateCustomerUser':
      return `run "chat-auth users get ${args[0]}" to see whether it is active; ${repeatSafe}`
    case 'createWebhook':
      return `run "chat-auth webhooks list ${args[0]}": a webhook there whose secret you never saw was made by this call; delete it with "chat-auth webhooks delete WEBHOOK_ID" and create another (two would each get every event)`
    case 'deleteWebhook':
      return `run "chat-auth webhooks list <its company id>": once ${args[0]} is not there it is deleted; a repeat answers 404`
    case 'previewCompanyRevocation':
    case 'previewAgentRevocation':
    case 'searchCompanies':
    case 'findCustomerUser':
    case 'listOperators':
    case 'listNodes':
      return undefined
    case 'invalidateUser':
      return `run "chat-auth users get ${args[0]}": a tokenVersion one higher than before means it was; running it again would also revoke the tokens issued since`
    case 'revokeToken':
      return 'running it again is harmless: a revoked token answers 200 again'
    case 'redeliver':
      return 'run "chat-auth webhooks deliveries <its webhook id>": a new pending delivery of that event means it was; running it again would queue another'
    case 'createOperator':
      return `run "chat-auth operators list": an operator named "${args[0].name}" there whose token you never saw was made by this call; revoke it with "chat-auth operators revoke OPERATOR_ID" and create another`
    case 'revokeOperator':
      return 'running it again is harmless: a revoked operator answers with its revocation time'
    case 'listWebhooks':
    case 'listWebhookDeliveries':
    case 'getCompany':
    case 'listApiKeys':
    case 'getCustomerUser':
    case 'listEvents':
      return undefined
  }
}

/** Flags a command cannot do without (checked before the call is made). */
const REQUIRED_FLAGS: Record<string, Array<keyof Flags>> = {
  'companies create': ['name'],
  'agents create': ['name'],
  'webhooks create': ['endpoint'],
  'operators create': ['name', 'role'],
  'users find': ['company-id', 'external-id'],
}

/** The usage lines of one group, or of every group. */
export function adminUsage(group?: string): string {
  const groups = group === undefined ? Object.keys(COMMANDS) : [group]
  return groups.flatMap((g) => Object.entries(COMMANDS[g] ?? {}).map(([action, c]) => `  chat-auth ${g} ${action} ${c.usage}`)).join('\n') + '\n'
}

export function isAdminGroup(group: string): boolean {
  return Object.hasOwn(COMMANDS, group)
}

/** Maps `group action [id] --flags` to the admin client's call. */
export function adminCall(group: string, action: string, id: string | undefined, flags: Flags): AdminCall {
  const actions = Object.hasOwn(COMMANDS, group) ? COMMANDS[group]! : undefined
  if (actions === undefined) throw new UsageError(`unknown command: ${[group, action].filter(Boolean).join(' ')}`)
  if (!action) throw new UsageError(`${group} needs an action: ${Object.keys(actions).join(', ')}`, group)
  const command = Object.hasOwn(actions, action) ? actions[action]! : undefined
  if (command === undefined) throw new UsageError(`${group} has no action "${action}"`, group)
  const name = `${group} ${action}`
  for (const flag of REQUIRED_FLAGS[name] ?? []) required(flags[flag] as string | undefined, `--${flag}`, name)
  const activeFlag = (): boolean | undefined => {
    if (flags.active === undefined) return undefined
    if (flags.active !== 'true' && flags.active !== 'false') throw new UsageError('--active takes true or false')
    return flags.active === 'true'
  }
  const limitFlag = (): number | undefined => {
    if (flags.limit === undefined) return undefined
    if (!/^\d+$/.test(flags.limit)) throw new UsageError('--limit takes a whole number (1-500)')
    return Number(flags.limit)
  }
  // The client encodes ids into the path itself.
  return command.call((what) => required(id, what, name), { ...flags, activeFlag, limitFlag })
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
