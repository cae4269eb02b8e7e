// Every chaos node: `chat-auth serve`'s node (buildApp's parts, listen, graceful close), with
// test-only routes to hold sessions on it and to tell which events its streams were written
// (below), and, for a mutant run, one coherence
// defence taken out by a mutant (mutants.mjs): a mutant run must find violations, or its
// checker proves nothing. It runs the built service (npm run build first).
//   node node-host.mjs [<mutant>]
// With a mutant, /metrics gains chat_auth_chaos_mutant_calls_total{mutant}: how often it acted.
import { loadConfig } from '../../../dist/src/config.js'
import { createLogger } from '../../../dist/src/logger.js'
import { buildApp } from '../../../dist/src/app.js'
import { closeOnSignals } from '../../../dist/src/server.js'
import { createMutant } from './mutants.mjs'

const name = process.argv[2]
const config = loadConfig()
const mutant = name ? createMutant(name, config) : undefined
const logger = createLogger(config)

// Every event stream's writes are noted (what the checker asks right after a 200), around the mutant's hub if it has one.
const written = new Set()
const parts = { ...mutant?.parts, eventHub: (hub) => noteWrites(mutant?.parts.eventHub ? mutant.parts.eventHub(hub) : hub, written) }
// The chaos routes are registered before the app is ready.
const { app: fastify, gateway } = await buildApp(config, { logger, parts }, async (instance) => {
  await chaosSessionRoutes(instance)
  await chaosStreamRoutes(instance, written)
})
if (mutant) gateway.metrics.collect('chat_auth_chaos_mutant_calls_total', 'Times the chaos mutant acted (chaos tests only)', 'counter', () => [{ labels: { mutant: name }, value: mutant.calls() }], ['mutant'])
await fastify.listen({ port: config.port, host: config.host })
closeOnSignals({ app: fastify, gateway, url: `http://${config.host}:${config.port}`, close: () => fastify.close() }, logger)

/**
 * Sessions held open on this node for the chaos checker, as a chat server would hold them
 * with `openChatSession` (SPEC §8.1):
 * - `POST /chaos/sessions {token}` → `{id}`, or `{refused: code}` for a denied token;
 * - `POST /chaos/sessions/status {ids}` → `{sessions: [{open, code}]}` in the same order:
 *   `open` is false once the session was aborted, `code` the reason's code;
 * - `POST /chaos/sessions/close {ids}` → `{closed}`: the chat connection ended by itself
 *   (`close()`), so that the sessions left beside it must still be ended by their changes.
 * The node's own close aborts them (NODE_CLOSING); they are forgotten with it.
 */
async function chaosSessionRoutes(instance) {
  const held = new Map()
  let next = 0
  instance.post('/chaos/sessions', async (request, reply) => {
    let opened
    try {
      opened = await instance.gateway.sessions.open(request.body?.token)
    } catch {
      return reply.code(503).send({ refused: 'SERVICE_UNAVAILABLE' })
    }
    if (!opened.ok) return { refused: opened.denial.code }
    const id = String(++next)
    held.set(id, opened)
    return { id }
  })
  instance.post('/chaos/sessions/status', async (request) => ({
    sessions: (request.body?.ids ?? []).map((id) => {
      const session = held.get(id)
      if (session === undefined) return { open: false, code: 'UNKNOWN' }
      return { open: !session.signal.aborted, code: session.signal.aborted ? session.signal.reason?.code : undefined }
    }),
  }))
  instance.post('/chaos/sessions/close', async (request) => {
    let closed = 0
    for (const id of request.body?.ids ?? []) {
      const session = held.get(id)
      if (session === undefined) continue
      session.close()
      held.delete(id)
      closed++
    }
    return { closed }
  })
  instance.addHook('onClose', async () => {
    for (const session of held.values()) session.close()
    held.clear()
  })
}

/**
 * The key the checker knows an event by: a user's invalidation by its new version, a token's
 * revocation by its jti, anything else by its id.
 */
function eventKey(event) {
  if (event.type === 'tokens.invalidated') return `${event.type}:${event.subject.id}:${event.detail.newTokenVersion}`
  if (event.type === 'token.revoked') return `${event.type}:${event.subject.jti}`
  return `${event.type}:${event.id}`
}

/** The hub, with each stream's response noting the events handed to its socket (SSE `data:` lines). */
function noteWrites(hub, written) {
  return {
    ...hub,
    open(subscription) {
      const { response } = subscription
      const write = response.write.bind(response)
      response.write = (chunk, ...rest) => {
        for (const line of String(chunk).split('\n')) if (line.startsWith('data: {')) written.add(eventKey(JSON.parse(line.slice(6))))
        return write(chunk, ...rest)
      }
      return hub.open(subscription)
    },
  }
}

/** `POST /chaos/stream/written {keys}` → `{written: [boolean]}`: whether this node wrote each event to a stream. */
async function chaosStreamRoutes(instance, written) {
  instance.post('/chaos/stream/written', async (request) => ({ written: (request.body?.keys ?? []).map((key) => written.has(key)) }))
}
