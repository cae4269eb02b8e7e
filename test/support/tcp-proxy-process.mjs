// The TCP proxy of tcp-proxy.ts, in a process of its own so that the load the test drives
// never delays the bytes between a node and Redis. Plain JavaScript: it runs without a loader.
// Controlled over IPC: { id, op, match? } → { id, result }.
import net from 'node:net'

const targetPort = Number(process.argv[2])
const targetHost = process.argv[3] ?? '127.0.0.1'
const links = new Set()
let refusing = false

const server = net.createServer((client) => {
  if (refusing) {
    client.resetAndDestroy()
    return
  }
  const upstream = net.connect({ host: targetHost, port: targetPort })
  const link = { client, upstream, first: '', swallowed: false, stalled: false }
  links.add(link)
  client.setNoDelay(true)
  upstream.setNoDelay(true)
  const end = () => {
    if (!links.delete(link)) return
    client.destroy()
    upstream.destroy()
  }
  client.on('data', (data) => {
    if (link.first.length < 200) link.first += data.toString('latin1', 0, 200)
    if (!link.swallowed) upstream.write(data)
  })
  upstream.on('data', (data) => {
    if (!link.swallowed) client.write(data)
  })
  for (const socket of [client, upstream]) {
    socket.on('error', end)
    socket.on('close', end)
  }
})

const matching = (match) => [...links].filter((link) => match === undefined || match === null || link.first.includes(match))

const ops = {
  count: (match) => matching(match).length,
  blackhole(match) {
    const hit = matching(match)
    for (const link of hit) link.swallowed = true
    return hit.length
  },
  reset(match) {
    const hit = matching(match)
    for (const link of hit) {
      links.delete(link)
      link.client.resetAndDestroy()
      link.upstream.resetAndDestroy()
    }
    return hit.length
  },
  stall(match) {
    const hit = matching(match)
    for (const link of hit) {
      link.stalled = true
      link.upstream.pause()
    }
    return hit.length
  },
  resume() {
    for (const link of links) {
      if (!link.stalled) continue
      link.stalled = false
      link.upstream.resume()
    }
    return 0
  },
  refuse() {
    refusing = true
    return 0
  },
  accept() {
    refusing = false
    return 0
  },
}

process.on('message', ({ id, op, match }) => {
  process.send({ id, result: ops[op](match) })
})
process.on('disconnect', () => process.exit(0))

server.listen(0, '127.0.0.1', () => process.send({ ready: server.address().port }))
