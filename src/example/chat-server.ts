/**
 * SPEC §8.3: a small chat server that closes a user's WebSocket the moment their token is
 * revoked. Fastify + @fastify/websocket + the gateway's plugin (`openChatSession`), plus a
 * stand-in for the customer's own backend (POST /token), which holds the API key and asks the
 * gateway for a token. Run it with `npm run example:chat` next to a gateway (docs/live-revocation.md,
 * "The example chat server"). Not part of the published package.
 */
import { pathToFileURL } from 'node:url'
import websocket from '@fastify/websocket'
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Logger } from 'pino'
import type { WebSocket } from 'ws'
import { loadConfig, type Config } from '../config.js'
import { body, toApiError } from '../http/error-handler.js'
import { createLogger } from '../logger.js'
import { chatAuthPlugin, type ChatSession } from '../plugin.js'
import { CHAT_PAGE } from './page.js'

export interface ChatExampleOptions {
  /** the gateway's settings: the plugin joins its PostgreSQL and Redis as one more node */
  config: Config
  /** where the stand-in customer backend asks for tokens, e.g. http://127.0.0.1:3000 */
  gatewayUrl: string
  /** the customer company's API key (kept on the server: the browser never sees it) */
  keyId: string
  keySecret: string
  logger?: Logger
}

/** the close code the page sees for a token that is no longer valid (4000–4999: the application's own) */
export const TOKEN_REFUSED = 4001
/** longest chat message accepted, in characters */
const MAX_TEXT = 2000

type Open = Extract<ChatSession, { ok: true }>

/**
 * A session that ended because of the node or the stores is not a refused token: the page
 * keeps its token and reconnects (1012 Service Restart, 1013 Try Again Later). Every §3.3
 * denial (revoked, deactivated, expired…) is 4001 with the denial's message.
 */
function closeCode(code: string): number {
  if (code === 'NODE_CLOSING') return 1012
  if (code === 'SERVICE_UNAVAILABLE') return 1013
  return TOKEN_REFUSED
}

/** the token from the `bearer.<jwt>` subprotocol the page offers next to `chat` */
function tokenOf(protocolHeader: string | string[] | undefined): string | undefined {
  const offered = (Array.isArray(protocolHeader) ? protocolHeader.join(',') : (protocolHeader ?? '')).split(',').map((p) => p.trim())
  return offered.find((p) => p.startsWith('bearer.'))?.slice('bearer.'.length) || undefined
}

export async function buildChatExample(options: ChatExampleOptions): Promise<FastifyInstance> {
  const logger = options.logger ?? createLogger(options.config)
  const serverOptions: FastifyServerOptions = { loggerInstance: logger }
  const app = Fastify(serverOptions)
  await app.register(chatAuthPlugin, { config: options.config, logger })
  await app.register(websocket, {
    options: {
      maxPayload: 16 * 1024,
      // answer with `chat`, never echo the bearer "protocol" back
      handleProtocols: (protocols) => (protocols.has('chat') ? 'chat' : false),
    },
  })

  // Bad input gets the gateway's error bodies ({statusCode, message, code}), never a 500.
  app.setErrorHandler((error, request, reply) => {
    const answer = toApiError(error as Error)
    if (answer.statusCode >= 500) request.log.error({ err: error }, 'request failed')
    return reply.code(answer.statusCode).send(body(answer))
  })

  /** the sockets whose session is open: a message goes to each of them */
  const members = new Map<WebSocket, Open>()

  app.get('/', async (_request, reply) => reply.type('text/html; charset=utf-8').send(CHAT_PAGE))

  // The stand-in customer backend: a real one would first authenticate its own user; this
  // one trusts the name typed on the page. The gateway's answer (or refusal) is passed on.
  app.post<{ Body: { userId: string } }>(
    '/token',
    { schema: { body: { type: 'object', required: ['userId'], additionalProperties: false, properties: { userId: { type: 'string', minLength: 1, maxLength: 255 } } } } },
    async (request, reply) => {
      let answer: Response
      try {
        answer = await fetch(new URL('/rest/v1/auth/token', options.gatewayUrl), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ keyId: options.keyId, keySecret: options.keySecret, userId: request.body.userId, expiresIn: '1h' }),
          signal: AbortSignal.timeout(10_000),
        })
      } catch (error) {
        request.log.warn({ err: error }, 'the gateway did not answer')
        return reply.code(502).send({ statusCode: 502, message: 'The gateway did not answer', code: 'BAD_GATEWAY' })
      }
      const body = (await answer.json()) as Record<string, unknown>
      if (!answer.ok) return reply.code(answer.status).send(body)
      return { token: body.token, user: body.user, expiresAt: body.expiresAt }
    },
  )

  app.get('/chat', { websocket: true }, async (socket, request) => {
    let session: Open | undefined
    let closed = false
    // Listeners first (a frame that arrives while the session opens must not be missed);
    // nothing a socket sends is passed on before its session is open.
    socket.on('close', () => {
      closed = true
      members.delete(socket)
      session?.close()
    })
    socket.on('message', (data, isBinary) => {
      if (session === undefined || isBinary) return
      let text: unknown
      try {
        text = (JSON.parse(String(data)) as { text?: unknown }).text
      } catch {
        return
      }
      if (typeof text !== 'string' || text.length === 0 || text.length > MAX_TEXT) return
      const frame = JSON.stringify({ type: 'message', from: session.identity.user.externalId, text, at: new Date().toISOString() })
      for (const member of members.keys()) member.send(frame)
    })

    const opened = await app.openChatSession(tokenOf(request.headers['sec-websocket-protocol']))
    if (!opened.ok) return socket.close(opened.statusCode === 401 ? TOKEN_REFUSED : 1013, opened.body.message)
    if (closed) return opened.close() // the page left while its token was checked
    session = opened
    members.set(socket, opened)
    // Revoked, deactivated or expired: the signal aborts before the revoking call answers.
    opened.signal.addEventListener(
      'abort',
      () => {
        members.delete(socket)
        const reason = opened.signal.reason as { code: string; message: string }
        socket.close(closeCode(reason.code), reason.message)
      },
      { once: true },
    )
    socket.send(JSON.stringify({ type: 'ready', user: opened.identity.user }))
  })

  return app
}

/** `npm run example:chat`: the gateway's environment, plus the example's own variables. */
async function main(): Promise<void> {
  const env = process.env
  const keyId = env.CHAT_KEY_ID
  const keySecret = env.CHAT_KEY_SECRET
  if (!keyId || !keySecret) {
    process.stderr.write('set CHAT_KEY_ID and CHAT_KEY_SECRET (an API key of the company to chat in), and the gateway\'s DATABASE_URL and REDIS_URL\n')
    process.exit(2)
  }
  const config = loadConfig(env)
  const app = await buildChatExample({ config, gatewayUrl: env.CHAT_AUTH_URL ?? 'http://127.0.0.1:3000', keyId, keySecret })
  const url = await app.listen({ port: Number(env.CHAT_EXAMPLE_PORT ?? 3001), host: env.CHAT_EXAMPLE_HOST ?? '127.0.0.1' })
  process.stdout.write(`example chat on ${url} (open it in two browser windows)\n`)
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void app.close().then(() => process.exit(0)))
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
    process.exit(1)
  })
}
