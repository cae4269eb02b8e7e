import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

/**
 * The import rules of ARCHITECTURE.md ("What may never import what"), checked on the
 * sources as text: a change that breaks one fails here, naming the file and the import.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url))

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => /\.(ts|mjs)$/.test(name) && !name.endsWith('.d.ts'))
    .map((name) => join(dir, name))
}

/** Each import of `file`: project files as paths from the root (src/x.ts), packages by name. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8')
  return [...text.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm)].map((m) => {
    const spec = (m[1] ?? m[2])!
    return spec.startsWith('.') ? relative(ROOT, normalize(join(ROOT, dirname(file), spec))).replace(/\.js$/, '.ts') : spec
  })
}

const src = sources('src')
const inside = (file: string, ...prefixes: string[]) => prefixes.some((p) => file === p || file.startsWith(p.endsWith('/') ? p : p + '/'))

function rule(name: string, files: string[], broken: (target: string, file: string) => boolean) {
  t.test(name, async (t) => {
    const found = files.flatMap((file) => importsOf(file).filter((target) => broken(target, file)).map((target) => `${file} imports ${target}`))
    t.same(found, [])
  })
}

t.test('the scan sees the imports', async (t) => {
  t.ok(src.length > 20, 'src/ has its files')
  t.ok(importsOf('src/app.ts').includes('src/gateway.ts'), 'relative imports resolve to root paths')
  t.ok(importsOf('src/app.ts').includes('fastify'), 'packages keep their names')
  t.ok(src.some((f) => inside(f, 'src/client')), 'the client is scanned')
})

rule('domain.ts and errors.ts import nothing of the project', ['src/domain.ts', 'src/errors.ts'], (target) => target.startsWith('src/'))
rule('store/ imports only store/, domain.ts and errors.ts of the project', src.filter((f) => inside(f, 'src/store')), (target) =>
  target.startsWith('src/') && !inside(target, 'src/store', 'src/domain.ts', 'src/errors.ts'),
)
rule('only store/ imports the PostgreSQL drivers', src.filter((f) => !inside(f, 'src/store')), (target) => target === 'pg' || target.startsWith('@electric-sql/pglite'))
rule('only bus/ imports ioredis', src.filter((f) => !inside(f, 'src/bus')), (target) => target === 'ioredis')
rule(
  'the checks, caches, bus, sessions, webhook sender, changes and store know no HTTP',
  src.filter((f) => inside(f, 'src/auth', 'src/cache', 'src/bus', 'src/sessions', 'src/webhooks', 'src/store', 'src/changes.ts', 'src/domain.ts')),
  (target) => target.startsWith('fastify') || target.startsWith('@fastify/') || inside(target, 'src/routes', 'src/http', 'src/app.ts'),
)
rule('only the entry points import gateway.ts', src.filter((f) => !['src/app.ts', 'src/plugin.ts', 'src/server.ts', 'src/index.ts', 'src/gateway.ts'].includes(f)), (target) => target === 'src/gateway.ts')
rule('the client (chat-auth-gateway/client) imports nothing but its own files: no server code, no package', src.filter((f) => inside(f, 'src/client')), (target) =>
  !inside(target, 'src/client'),
)
rule('the server never imports the client (only the CLI uses it)', src.filter((f) => !inside(f, 'src/client') && !['src/cli.ts', 'src/admin-calls.ts'].includes(f)), (target) => inside(target, 'src/client'))
rule('only telemetry/ imports OpenTelemetry (the rest marks its steps on trace-points.ts, Node\'s diagnostics channels)', src.filter((f) => !inside(f, 'src/telemetry')), (target) =>
  target.startsWith('@opentelemetry/') || target === '@fastify/otel',
)
rule('only the CLI imports telemetry/ (dynamically, for serve, when OTEL_* variables ask for traces)', src.filter((f) => !inside(f, 'src/telemetry') && f !== 'src/cli.ts'), (target) => inside(target, 'src/telemetry'))
t.test('the CLI imports telemetry/ only dynamically', async (t) => {
  const text = readFileSync(join(ROOT, 'src/cli.ts'), 'utf8')
  t.notMatch(text, /^\s*import\s[^(]*from\s+['"]\.\/telemetry\//m, 'no static import')
  t.match(text, /import\(['"]\.\/telemetry\/start\.js['"]\)/, 'a dynamic one')
})
const consoleSources = readdirSync(join(ROOT, 'console/src'), { recursive: true, encoding: 'utf8' })
  .filter((name) => /\.tsx?$/.test(name))
  .map((name) => join('console/src', name))
t.test('the console is scanned', async (t) => t.ok(consoleSources.some((f) => f.endsWith('.tsx')) && importsOf('console/src/main.tsx').includes('preact')))
rule('the console (console/src) takes the admin API only through the client, and no package but Preact', consoleSources, (target) =>
  target.startsWith('src/') ? !inside(target, 'src/client') : !inside(target, 'console/src') && target !== 'preact' && !target.startsWith('preact/'),
)
rule('the test toolkit imports no test, no chaos code and no bench code', sources('test/support'), (target) =>
  /\.test\.ts$/.test(target) || inside(target, 'test/chaos', 'bench'),
)
rule('tests import no chaos code and no bench code', sources('test').filter((f) => !inside(f, 'test/chaos')), (target) => inside(target, 'test/chaos', 'bench'))

t.test('routes never call the publishing writes of the store: they go through changes', async (t) => {
  const writes = /\bstore\.(incrementTokenVersion|setUserActive|setUserAgent|updateAgent|revokeApiKey|revokeCompanyTokens|revokeAgentTokens|revokeToken)\(/
  t.same(src.filter((f) => inside(f, 'src/routes') && writes.test(readFileSync(join(ROOT, f), 'utf8'))), [])
})

t.test('only config.ts reads process.env (and the example chat server, a program of its own that reads its own variables)', async (t) => {
  t.same(src.filter((f) => f !== 'src/config.ts' && !inside(f, 'src/example') && /process\.env\b/.test(readFileSync(join(ROOT, f), 'utf8'))), [])
})

t.test('every file in src/bus/ is at most 250 lines (one job each)', async (t) => {
  const long = src.filter((f) => inside(f, 'src/bus')).filter((f) => readFileSync(join(ROOT, f), 'utf8').split('\n').length - 1 > 250)
  t.same(long, [])
})

t.test('a committed change takes one path: only change-pipeline.ts subscribes to a bus (the buses themselves aside)', async (t) => {
  const subscribes = /\.(onChange|onEpochChange)\(\s*(\(|async\b|[a-zA-Z_$][\w$]*\s*=>)/
  const outside = src.filter((f) => f !== 'src/change-pipeline.ts' && !inside(f, 'src/bus'))
  t.same(outside.filter((f) => subscribes.test(readFileSync(join(ROOT, f), 'utf8'))), [])
  t.match(readFileSync(join(ROOT, 'src/change-pipeline.ts'), 'utf8'), subscribes, 'the pattern sees a subscription')
})

rule('http/ never imports routes/: a route hands http/ what it needs, never the other way', src.filter((f) => inside(f, 'src/http')), (target) => inside(target, 'src/routes'))

t.test("only http/node-internals.ts touches Node's private fields and methods (the start-up check and the fallback are there)", async (t) => {
  // Node's own names for what it keeps private, used as code (comments left out): the symbols
  // it is looked up by, the underscore methods and fields of its sockets, streams and
  // messages, the parser and the answer it hangs on a socket.
  const privateUse =
    /['"`]kOutHeaders['"`]|getOwnPropertySymbols|Symbol\.for\(\s*['"]nodejs\.|\._(?:writeGeneric|writev?|destroy|httpMessage|header|handle|readableState|writableState)\b|\b_(?:writeGeneric|httpMessage)\b|\.parser\b|\bparser\?\./
  const code = (file: string) => readFileSync(join(ROOT, file), 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|\s)\/\/.*$/gm, '')
  t.same(src.filter((f) => f !== 'src/http/node-internals.ts' && !inside(f, 'src/client') && privateUse.test(code(f))), [])
  t.match(code('src/http/node-internals.ts'), privateUse, 'the check sees what that module does')
  // what http/checked-headers.ts, write-batching.ts and client-errors.ts did on main
  for (const line of ["symbol.description === 'kOutHeaders'", 'socket._writev = queueWritev', 'Socket.prototype._destroy', 'const { parser, _httpMessage: response } = socket', 'parser?.incoming']) {
    t.match(line, privateUse, `it catches ${line}`)
  }
})

t.test('the verify path is written in one file', async (t) => {
  const naming = src.filter((f) => readFileSync(join(ROOT, f), 'utf8').includes('/rest/v1/auth/verify') && !inside(f, 'src/client', 'src/example'))
  t.same(naming, ['src/routes/verify/path.ts'])
})

t.test('MaybePromise and andThen are a leaf of their own (src/maybe-promise.ts), defined nowhere else', async (t) => {
  const defining = src.filter((f) => /^export (?:type MaybePromise\b|function andThen\b)/m.test(readFileSync(join(ROOT, f), 'utf8')))
  t.same(defining, ['src/maybe-promise.ts'])
  t.same(importsOf('src/maybe-promise.ts'), [], 'it imports nothing')
})

t.test('outside the client, no two modules export a type of the same name', async (t) => {
  const owners = new Map<string, string[]>()
  for (const file of src.filter((f) => !inside(f, 'src/client'))) {
    for (const [, name] of readFileSync(join(ROOT, file), 'utf8').matchAll(/^export (?:interface|type|class) (\w+)/gm)) owners.set(name!, [...(owners.get(name!) ?? []), file])
  }
  t.same([...owners].filter(([, files]) => files.length > 1).map(([name, files]) => `${name}: ${files.join(', ')}`), [])
})

t.test("a module re-exports only its own folder's modules (index.ts, the library's surface, excepted)", async (t) => {
  const found: string[] = []
  for (const file of src.filter((f) => f !== 'src/index.ts' && f !== 'src/client/index.ts')) {
    const text = readFileSync(join(ROOT, file), 'utf8')
    // a module may be the face of its own folder (store/store.ts), or of the folder of its name (config.ts → config/)
    const own = [dirname(file), file.replace(/\.ts$/, '')]
    for (const [, spec] of text.matchAll(/^export\s+(?:type\s+)?(?:\*|\{[^}]*\})\s+from\s+['"]([^'"]+)['"]/gm)) {
      const target = spec!.startsWith('.') ? relative(ROOT, normalize(join(ROOT, dirname(file), spec!))).replace(/\.js$/, '.ts') : spec!
      if (!own.some((folder) => dirname(target) === folder)) found.push(`${file} re-exports ${target}`)
    }
  }
  t.same(found, [])
})

t.test('every src/ path a test names exists', async (t) => {
  const tests = sources('test').filter((f) => f !== 'test/unit/architecture.test.ts')
  const named = tests.flatMap((file) =>
    [...readFileSync(join(ROOT, file), 'utf8').matchAll(/(?<![\w./-])src\/[\w./-]+\.(?:ts|mjs)\b/g)].map((m) => ({ file, path: m[0] })),
  )
  t.ok(named.length > 20, 'the scan sees the paths the tests name')
  t.same(named.filter(({ path }) => !existsSync(join(ROOT, path))).map(({ file, path }) => `${file} names ${path}`), [])
})

t.test('the age prune of the change log and of the events is written once, in store/', async (t) => {
  // DELETE … RETURNING xid, then the highest xid pruned remembered: the shape both share
  const writing = src.filter((f) => inside(f, 'src/store') && /RETURNING xid\)/.test(readFileSync(join(ROOT, f), 'utf8')))
  t.same(writing, ['src/store/prune.ts'])
})
