import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import semver from 'semver'
import t from 'tap'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'))

t.test('npm pack ships what a user runs, and nothing else', async (t) => {
  // --ignore-scripts: dist/ is built by `npm test`; the file list is what matters here.
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT })
  const files: string[] = JSON.parse(stdout)[0].files.map((f: { path: string }) => f.path)
  for (const needed of ['package.json', 'README.md', 'dist/src/cli.js', 'dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/client/index.js', 'dist/src/client/index.d.ts', 'migrations/001_schema.sql']) {
    t.ok(files.includes(needed), `ships ${needed}`)
  }
  const unexpected = files.filter((f) => !/^(package\.json|README\.md|LICENSE|migrations\/\d+_\w+\.sql|dist\/src\/.+\.(js|d\.ts))$/.test(f))
  t.same(unexpected, [], 'no bench, tests, sources or source maps')
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
  t.same(exported.client, ['AdminClient', 'CLIENT_CODES', 'ChatAuthClient', 'ChatAuthError'])
  t.equal(exported.main, 'function', 'the main entry still resolves through exports')
})

/**
 * Declared stricter than what runs, and nothing we can choose: fastify's app.inject loads
 * light-my-request, whose cookie@2 says Node >=22 (it is ESM, which Node loads from require
 * since 20.19). The server never loads it (fastify requires light-my-request only on inject);
 * pinning light-my-request to its last cookie@1 release (6.6.0) would make HEAD injections
 * return a body again. npm install on Node 20 warns about these packages only.
 */
const KNOWN_STRICTER: Record<string, string> = {
  'node_modules/cookie': '>=22',
  // The same case: @fastify/static (under @fastify/swagger-ui, the /docs page) loads this ESM
  // package with require(), which Node 20.19 does, and calls it only for reply.download(),
  // which the service never uses; create() runs on Node 20 as it is.
  'node_modules/content-disposition': '>=22',
}

t.test('engines is true: every installed package supports the oldest Node versions it admits', async (t) => {
  const range: string = pkg.engines.node
  // The oldest version of each major the range admits.
  const oldest = ['20.0.0', '21.0.0', '22.0.0', '23.0.0', '24.0.0'].map((v) => semver.minSatisfying([...versionsFrom(v)], range)).filter((v): v is string => v !== null)
  t.ok(oldest.length > 0, `${range} admits some Node version`)
  t.ok(oldest.every((v) => semver.gte(v, '20.12.0')), 'crypto.hash (used for every key secret) exists from Node 20.12')
  const lock = JSON.parse(readFileSync(new URL('../package-lock.json', import.meta.url), 'utf8'))
  const refused: string[] = []
  for (const [path, info] of Object.entries<{ engines?: { node?: string } }>(lock.packages)) {
    const wants = info.engines?.node
    if (!path || wants === undefined || KNOWN_STRICTER[path] === wants) continue
    for (const version of oldest) if (!semver.satisfies(version, wants)) refused.push(`${path.replace(/^.*node_modules\//, '')} wants ${wants}, not ${version}`)
  }
  t.same(refused, [], `every dependency accepts ${oldest.join(' and ')}`)
})

/** Every x.y.0 of one major, enough to find the oldest a range admits. */
function* versionsFrom(first: string): Generator<string> {
  const major = semver.major(first)
  for (let minor = 0; minor < 40; minor++) yield `${major}.${minor}.0`
}
