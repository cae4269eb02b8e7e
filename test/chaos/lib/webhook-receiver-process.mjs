// The chaos runs' webhook receiver (webhook-receiver.ts), in a process of its own: the
// driver's load saturates the test's own process on a busy machine, and a receiver there
// answered attempts after the sender's 5 s timeout, which paused the endpoint for a
// doubling wait until nothing was delivered in the run. Plain JavaScript: it runs without a loader.
//   node webhook-receiver-process.mjs <first-of-every-fifth | first-of-each>
// Controlled over IPC: { id, op: 'secret', secret } | { id, op: 'counts' } → { id, result };
// it sends { ready: port } once listening on 127.0.0.1.
import http from 'node:http'
import { Webhook } from 'standardwebhooks'

// What is refused (500), from the attempt of an event and the event's place among those seen
// (from 1): never at random, and never every n-th attempt (see webhook-receiver.ts).
const RULES = {
  'first-of-every-fifth': (attemptOfEvent, ordinal) => attemptOfEvent === 1 && ordinal % 5 === 0,
  'first-of-each': (attemptOfEvent) => attemptOfEvent === 1,
}
const refuse = RULES[process.argv[2]]
if (!refuse) throw new Error(`name a rule: ${Object.keys(RULES).join(', ')}`)

let verifier
const attemptsOf = new Map()
const ordinals = new Map()
const accepted = new Set()
const counts = { attempts: 0, failedOnPurpose: 0, duplicates: 0, badSignatures: 0 }

const server = http.createServer((request, response) => {
  let body = ''
  request.setEncoding('utf8')
  request.on('data', (chunk) => (body += chunk))
  request.on('end', () => {
    counts.attempts++
    // Before the test has told it the endpoint's secret: not a bad signature, and sent again.
    if (verifier === undefined) return void response.writeHead(503).end()
    try {
      verifier.verify(body, request.headers)
    } catch {
      counts.badSignatures++
      return void response.writeHead(400).end()
    }
    const id = String(request.headers['webhook-id'])
    const n = (attemptsOf.get(id) ?? 0) + 1
    attemptsOf.set(id, n)
    if (n === 1) ordinals.set(id, ordinals.size + 1)
    if (refuse(n, ordinals.get(id))) {
      counts.failedOnPurpose++
      return void response.writeHead(500).end()
    }
    if (accepted.has(id)) counts.duplicates++
    accepted.add(id)
    response.writeHead(204).end()
  })
})

const ops = {
  secret({ secret }) {
    verifier = new Webhook(secret)
  },
  counts: () => ({ ...counts, accepted: [...accepted], attemptsOf: Object.fromEntries(attemptsOf) }),
}

process.on('message', (message) => process.send({ id: message.id, result: ops[message.op](message) }))
process.on('disconnect', () => process.exit(0))
server.listen(0, '127.0.0.1', () => process.send({ ready: server.address().port }))
