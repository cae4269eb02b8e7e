import { readFileSync } from 'node:fs'
import t from 'tap'
import { CONFIG_VARIABLES, loadConfig } from '../src/config.js'

const root = new URL('../', import.meta.url)

/** The `environment:` block of the gateway service in docker-compose.yml, as name → value. */
function gatewayEnvironment(): Record<string, string> {
  const lines = readFileSync(new URL('docker-compose.yml', root), 'utf8').split('\n')
  const start = lines.findIndex((line) => /^ {2}environment:\s*$/.test(line))
  const env: Record<string, string> = {}
  for (const line of lines.slice(start + 1)) {
    const match = /^ {4}([A-Z_][A-Z0-9_]*):\s*(.*)$/.exec(line)
    if (!match) break
    env[match[1]!] = match[2]!.replace(/^"(.*)"$/, '$1')
  }
  return env
}

t.test('docker-compose sets only variables the config accepts, with values it accepts', async (t) => {
  const env = gatewayEnvironment()
  t.ok(Object.keys(env).length >= 5, 'found the gateway environment')
  for (const name of Object.keys(env)) t.ok((CONFIG_VARIABLES as readonly string[]).includes(name), `${name} is a config variable`)
  // Substitute the operator's secrets the way `docker compose` would.
  const resolved = Object.fromEntries(
    Object.entries(env).map(([name, value]) => [name, value.replace(/\$\{ADMIN_TOKEN[^}]*\}/, 'a'.repeat(24)).replace(/\$\{JWT_SECRET[^}]*\}/, 'b'.repeat(64))]),
  )
  const config = loadConfig(resolved)
  t.equal(config.host, '0.0.0.0')
  t.match(config.databaseUrl, /^postgres:\/\//)
  t.match(config.redis, { kind: 'url', url: /^redis:\/\// })
})

t.test("the README's configuration table lists exactly the variables the config reads", async (t) => {
  const readme = readFileSync(new URL('README.md', root), 'utf8')
  const table = readme.slice(readme.indexOf('## Configuration'))
  const documented = new Set([...table.matchAll(/^\| `([A-Z_]+)`/gm)].map((m) => m[1]!))
  t.same([...documented].sort(), [...CONFIG_VARIABLES].sort())
})
