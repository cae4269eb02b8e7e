import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'

/** One POST a receiver took, with what the signature check made of it. */
export interface Received {
  /** 1 for the first request this receiver took */
  n: number
  headers: Record<string, string>
  body: string
  /** the event as JSON */
  event: { id: string; type: string; at: string; companyId: string; actor: Record<string, unknown>; subject: Record<string, unknown>; detail: Record<string, unknown> }
  /** `new Webhook(secret).verify(body, headers)` passed (the standardwebhooks package) */
  verified: boolean
  /** the answer has been sent (false while a `hang` holds it) */
  answered: boolean
  /** the connection of this request is gone, or its answer was sent: it no longer holds a sender */
  ended: boolean
}

/**
 * What to do with a request: a status to answer; `hang` (answer nothing until released);
 * `{ redirect }` (a 307 to that URL).
 */
export type Behaviour = number | 'hang' | { redirect: string }

export interface WebhookReceiver {
  readonly url: string
  readonly port: number
  readonly received: Received[]
  /** the secret the signatures are checked with (set it once the webhook is created) */
  secret: string | undefined
  /** how the n-th request (from 1) is answered; default 200 */
  behave: (request: Received) => Behaviour
  /** answers every held request with 200 */
  release(): void
  /** how many requests carried each event id */
  countsByEvent(): Map<string, number>
  /** requests taken and neither answered nor given up by their sender: the senders this receiver holds now */
  open(): number
  close(): Promise<void>
}

/** A real HTTP server on a free port (or `port`) of 127.0.0.1 (or `host`), recording every webhook POST it takes. */
export async function startWebhookReceiver(options: { port?: number; host?: string } = {}): Promise<WebhookReceiver> {
  const received: Received[] = []
  const held = new Set<{ response: ServerResponse; entry: Received }>()
  const receiver: WebhookReceiver = {
    url: '',
    port: 0,
    received,
    secret: undefined,
    behave: () => 200,
    release() {
      for (const hold of held) answer(hold.response, hold.entry, 200)
      held.clear()
    },
    open: () => received.filter((entry) => !entry.ended).length,
    countsByEvent() {
      const counts = new Map<string, number>()
      for (const entry of received) counts.set(entry.event.id, (counts.get(entry.event.id) ?? 0) + 1)
      return counts
    },
    close: async () => {
      receiver.release()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  const answer = (response: ServerResponse, entry: Received, status: number, headers: Record<string, string> = {}) => {
    if (response.destroyed) return
    response.writeHead(status, headers).end()
    entry.answered = true
  }
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]))
      let verified = false
      try {
        if (receiver.secret !== undefined) {
          new Webhook(receiver.secret).verify(body, headers)
          verified = true
        }
      } catch {
        verified = false
      }
      let event: Received['event']
      try {
        event = JSON.parse(body)
      } catch {
        event = { id: '', type: '', at: '', companyId: '', actor: {}, subject: {}, detail: {} }
      }
      const entry: Received = { n: received.length + 1, headers, body, event, verified, answered: false, ended: false }
      received.push(entry)
      response.on('close', () => (entry.ended = true))
      const behaviour = receiver.behave(entry)
      if (behaviour === 'hang') held.add({ response, entry })
      else if (typeof behaviour === 'number') answer(response, entry, behaviour)
      else answer(response, entry, 307, { location: behaviour.redirect })
    })
  })
  const host = options.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(options.port ?? 0, host, resolve))
  const port = (server.address() as AddressInfo).port
  Object.assign(receiver, { port, url: `http://${host}:${port}/hook` })
  return receiver
}
