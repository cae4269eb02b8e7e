import { once } from 'node:events'
import { createServer, type AddressInfo } from 'node:net'

/** A TCP port on 127.0.0.1 that was free a moment ago: the OS picks it, we release it. */
export async function freePort(): Promise<number> {
  const server = createServer()
  server.unref()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  server.close()
  await once(server, 'close')
  return port
}
