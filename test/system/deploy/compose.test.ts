import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { CONFIG_VARIABLES, loadConfig, VARIABLES, type Variable } from '../../../src/config.js'

const root = new URL('../../../', import.meta.url)

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

/** `docker compose -f docker-compose.yml -f docker-compose.sentinel.yml`: the gateway environment as merged, and the file. */
function sentinelVariant(): { env: Record<string, string>; file: string } {
  const file = readFileSync(new URL('docker-compose.sentinel.yml', root), 'utf8')
  const lines = file.split('\n')
  const start = lines.findIndex((line) => /^x-sentinel-env: &sentinel-env\s*$/.test(line))
  const env = { ...gatewayEnvironment() }
  for (const line of lines.slice(start + 1)) {
    if (/^\s*#/.test(line)) continue
    const match = /^ {2}([A-Z_][A-Z0-9_]*):\s*(.*)$/.exec(line)
    if (!match) break
    env[match[1]!] = match[2]!.replace(/^"(.*)"$/, '$1')
  }
  return { env, file }
}

t.test('the Sentinel variant (docker-compose.sentinel.yml) configures every node for the sentinels it starts', async (t) => {
  const { env, file } = sentinelVariant()
  for (const name of Object.keys(env)) t.ok((CONFIG_VARIABLES as readonly string[]).includes(name), `${name} is a config variable`)
  const resolved = Object.fromEntries(
    Object.entries(env)
      .filter(([, value]) => value !== '')
      .map(([name, value]) => [name, value.replace(/\$\{ADMIN_TOKEN[^}]*\}/, 'a'.repeat(24)).replace(/\$\{JWT_SECRET[^}]*\}/, 'b'.repeat(64))]),
  )
  const config = loadConfig(resolved)
  if (config.redis?.kind !== 'sentinel') return t.fail('the variant configures Redis Sentinel')
  const monitored = /sentinel monitor (\S+) (\S+) (\d+) (\d+)/.exec(file)
  t.equal(config.redis.name, monitored?.[1], 'REDIS_SENTINEL_NAME is the name the sentinels monitor')
  t.match(file, new RegExp(`^  ${monitored?.[2]}-replica:`, 'm'), 'the monitored primary has a replica in the file')
  const services = new Set([...file.matchAll(/^ {2}([a-z0-9-]+):/gm)].map((m) => m[1]!))
  t.equal(config.redis.sentinels.length, 3, 'three sentinels')
  for (const { host, port } of config.redis.sentinels) {
    t.ok(services.has(host), `${host} is a service of the variant`)
    t.equal(port, 26379)
  }
  t.ok(Number(monitored?.[4]) > config.redis.sentinels.length / 2, 'the failover quorum is a majority')
  for (const gateway of ['gateway-1', 'gateway-2']) t.match(file, new RegExp(`^  ${gateway}:\\n    environment: \\*sentinel-env`, 'm'), `${gateway} uses the sentinels`)
})

t.test("the configuration guide's table lists exactly the declared variables, in their order, with their defaults", async (t) => {
  const guide = readFileSync(new URL('docs/configuration.md', root), 'utf8')
  // The section alone: other pages and sections have tables of variables that are not ours (OpenTelemetry's).
  const start = guide.indexOf('\n## The variables\n')
  t.ok(start >= 0, 'docs/configuration.md has its "The variables" section')
  const end = guide.indexOf('\n## ', start + 1)
  const table = guide.slice(start, end < 0 ? undefined : end)
  const rows = [...table.matchAll(/^\| `([A-Z_]+)` \| (.+?) \|/gm)].map((m) => ({ name: m[1]!, fallback: m[2]!.replace(/^`(.*)`$/, '$1') }))
  t.same(rows.map((row) => row.name), Object.keys(VARIABLES))
  for (const { name, fallback } of rows) {
    const declared = (VARIABLES as Record<string, Variable<unknown>>)[name]
    t.equal(fallback, declared?.default ?? declared?.unset ?? '—', `${name}: the guide's default is the declared one`)
  }
})

/** The TypeScript files under `path` (a file or a folder) of the repository. */
function typeScriptFiles(path: string): string[] {
  if (!existsSync(path)) return []
  if (statSync(path).isFile()) return path.endsWith('.ts') ? [path] : []
  return readdirSync(path).flatMap((name) => typeScriptFiles(join(path, name)))
}

t.test('the image builds from what its Dockerfile copies: no source it compiles imports a file left out', async (t) => {
  const compose = readFileSync(new URL('docker-compose.yml', root), 'utf8')
  const copied = [...compose.matchAll(/^ +COPY (.+) \S+$/gm)].flatMap((m) => m[1]!.split(/\s+/))
  const rootDir = fileURLToPath(root)
  const inImage = (path: string) => copied.some((entry) => path === resolve(rootDir, entry) || path.startsWith(resolve(rootDir, entry) + '/'))
  t.ok(inImage(join(rootDir, 'src/cli.ts')), 'the CLI the image runs is copied')
  const missing: string[] = []
  for (const file of copied.flatMap((entry) => typeScriptFiles(resolve(rootDir, entry)))) {
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from |import\()'(\.{1,2}\/[^']+)'/g)) {
      const target = resolve(dirname(file), specifier!).replace(/\.js$/, '.ts')
      if (!inImage(target)) missing.push(`${relative(rootDir, file)} imports ${specifier}`)
    }
  }
  t.same(missing, [], 'tsc in the image would not find these')
})

/** `docker compose -f docker-compose.yml -f docker-compose.cluster.yml`: the gateway environment as merged, and the file. */
function clusterVariant(): { env: Record<string, string>; file: string } {
  const file = readFileSync(new URL('docker-compose.cluster.yml', root), 'utf8')
  const lines = file.split('\n')
  const start = lines.findIndex((line) => /^x-cluster-env: &cluster-env\s*$/.test(line))
  const env = { ...gatewayEnvironment() }
  for (const line of lines.slice(start + 1)) {
    if (/^\s*#/.test(line)) continue
    const match = /^ {2}([A-Z_][A-Z0-9_]*):\s*(.*)$/.exec(line)
    if (!match) break
    env[match[1]!] = match[2]!.replace(/^"(.*)"$/, '$1')
  }
  return { env, file }
}

t.test('the Cluster variant (docker-compose.cluster.yml) runs three masters with a replica each and configures every node for them', async (t) => {
  const { env, file } = clusterVariant()
  for (const name of Object.keys(env)) t.ok((CONFIG_VARIABLES as readonly string[]).includes(name), `${name} is a config variable`)
  const config = loadConfig(Object.fromEntries(Object.entries(env).map(([name, value]) => [name, value.replace(/\$\{ADMIN_TOKEN[^}]*\}/, 'a'.repeat(24)).replace(/\$\{JWT_SECRET[^}]*\}/, 'b'.repeat(64))])))
  if (config.redis?.kind !== 'cluster') return t.fail('the variant configures Redis Cluster')
  const services = [...file.matchAll(/^ {2}(redis-\d+): \*cluster-node$/gm)].map((m) => m[1]!)
  t.equal(services.length, 6, 'six cluster nodes')
  t.same(config.redis.nodes.map(({ host }) => host).sort(), services.sort(), 'every one of them a seed')
  t.ok(config.redis.nodes.every(({ port }) => port === 6379), 'on the port they listen on')
  t.match(file, /--cluster-enabled yes/, 'cluster mode')
  t.match(file, /redis-cli --cluster create \$\$ips --cluster-replicas 1/, 'three masters with a replica each')
  for (const gateway of ['gateway-1', 'gateway-2']) t.match(file, new RegExp(`^  ${gateway}:\\n    environment: \\*cluster-env`, 'm'), `${gateway} uses the cluster`)
})
