import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import semver from 'semver'
import t from 'tap'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8'))

t.test('npm pack ships what a user runs, and nothing else', async (t) => {
  // --ignore-scripts: dist/ is built by `npm test`; the file list is what matters here.
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT })
  const files: string[] = JSON.parse(stdout)[0].files.map((f: { path: string }) => f.path)
  for (const needed of ['package.json', 'README.md', 'dist/src/cli.js', 'dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/client/index.js', 'dist/src/client/index.d.ts', 'migrations/001_schema.sql']) {
    t.ok(files.includes(needed), `ships ${needed}`)
  }
  // The console (SPEC §10.3): what `chat-auth serve` serves at /console/, built by npm run build.
  t.ok(files.includes('dist/console/index.html'), 'ships the console page')
  t.same(files.filter((f) => f.startsWith('dist/console/assets/')).map((f) => f.replace(/-[A-Z0-9]{8}\./, '-HASH.')).sort(), ['dist/console/assets/console-HASH.css', 'dist/console/assets/console-HASH.js'], 'and its two hashed assets')
  const unexpected = files.filter((f) => !/^(package\.json|README\.md|LICENSE|migrations\/\d+_\w+\.sql|dist\/src\/.+\.(js|d\.ts)|dist\/console\/(index\.html|assets\/console-[A-Z0-9]{8}\.(js|css)))$/.test(f))
  t.same(unexpected, [], 'no bench, tests, sources (the console\'s neither) or source maps')
  t.same(files.filter((f) => f.startsWith('dist/src/example/')), [], 'nor the example chat server (its @fastify/websocket is a devDependency)')
})

t.test('chat-auth-gateway/client is an export of the package, and loads no server code', async (t) => {
  t.same(pkg.exports['./client'], { types: './dist/src/client/index.d.ts', default: './dist/src/client/index.js' })
  // Resolved by name, as a user's code resolves it (the package refers to itself through its exports).
  const script = `
    const client = await import('chat-auth-gateway/client')
    const main = await import('chat-auth-gateway')
    console.log(JSON.stringify({ client: Object.keys(client).sort(), main: typeof main.chatAuthPlugin }))`
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT })
  const exported = JSON.parse(stdout)
  t.same(exported.client, ['AdminClient', 'CLIENT_CODES', 'ChatAuthClient', 'ChatAuthError', 'ConsoleCalls', 'OAuthCalls'])
  t.equal(exported.main, 'function', 'the main entry still resolves through exports')
})

/**
 * Two dependencies' newest majors say Node >=22 for no feature Node 20 lacks, and the exact
 * functions the service's dependencies call exist, with the same signature, in the previous
 * major (which admits Node 18): `overrides` in package.json pins those. Each pin is checked
 * here, so that an upgrade that starts calling something else is noticed.
 */
const PINNED: Array<{ name: string; user: string; calls: string }> = [
  // fastify's app.inject (light-my-request) calls stringifySetCookie({name, value, ...})
  { name: 'cookie', user: 'light-my-request/lib/cookies.js', calls: 'stringifySetCookie' },
  // @fastify/static (under @fastify/swagger-ui) calls create(filename, options) in reply.download()
  { name: 'content-disposition', user: '@fastify/static/index.js', calls: 'create' },
]

/** The version package.json's `overrides` pins `name` at, for whichever package depends on it. */
const pinnedVersion = (name: string): string | undefined => Object.values(pkg.overrides as Record<string, Record<string, string>>).find((pins) => pins[name] !== undefined)?.[name]

t.test('the pinned dependencies still provide what their users call', async (t) => {
  const require = createRequire(import.meta.url)
  for (const { name, user, calls } of PINNED) {
    const source = readFileSync(new URL(`../../../node_modules/${user}`, import.meta.url), 'utf8')
    const imported = new RegExp(`\\{[^}]*\\b${calls}\\b[^}]*\\}\\s*=\\s*require\\('([^']+)'\\)`).exec(source)
    t.ok(imported, `${user} takes ${calls} from require()`)
    const resolved = require.resolve(imported?.[1] ?? 'missing', { paths: [fileURLToPath(new URL(`../../../node_modules/${user}`, import.meta.url))] })
    // Wherever npm put it (nested, or hoisted when nothing else wants another version): the pinned version.
    const packageFile = resolved.slice(0, resolved.lastIndexOf(`/node_modules/${name}/`) + `/node_modules/${name}/`.length) + 'package.json'
    t.equal(JSON.parse(readFileSync(packageFile, 'utf8')).version, pinnedVersion(name), `${user} resolves the pinned ${name} (${packageFile})`)
    t.type(require(resolved)[calls], 'function', `the pinned copy exports ${calls}`)
  }
})

t.test('engines is true: every installed package supports the oldest Node versions it admits', async (t) => {
  const range: string = pkg.engines.node
  // The oldest version of each major the range admits.
  const oldest = ['20.0.0', '21.0.0', '22.0.0', '23.0.0', '24.0.0'].map((v) => semver.minSatisfying([...versionsFrom(v)], range)).filter((v): v is string => v !== null)
  t.ok(oldest.length > 0, `${range} admits some Node version`)
  t.ok(oldest.every((v) => semver.gte(v, '20.12.0')), 'crypto.hash (used for every key secret) exists from Node 20.12')
  const lock = JSON.parse(readFileSync(new URL('../../../package-lock.json', import.meta.url), 'utf8'))
  const refused: string[] = []
  for (const [path, info] of Object.entries<{ engines?: { node?: string } }>(lock.packages)) {
    const wants = info.engines?.node
    if (!path || wants === undefined) continue
    for (const version of oldest) if (!semver.satisfies(version, wants)) refused.push(`${path.replace(/^.*node_modules\//, '')} wants ${wants}, not ${version}`)
  }
  t.same(refused, [], `every dependency accepts ${oldest.join(' and ')}`)
})

/** Every x.y.0 of one major, enough to find the oldest a range admits. */
function* versionsFrom(first: string): Generator<string> {
  const major = semver.major(first)
  for (let minor = 0; minor < 40; minor++) yield `${major}.${minor}.0`
}
