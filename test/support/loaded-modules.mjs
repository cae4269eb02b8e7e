// `--import` this file (NODE_OPTIONS) to learn every module a process loads: the ES modules
// as its loader resolves them (a hook, on the loader's thread, appends each URL to
// LOADED_MODULES_FILE), then, at exit, the CommonJS modules of require.cache and whether
// anything registered a global OpenTelemetry tracer provider. Neither list alone is enough:
// an ES module never enters require.cache, and a CommonJS module's own require()s never
// reach an ES module loader hook. test/system/telemetry.test.ts reads the file.
import { appendFileSync } from 'node:fs'
import { createRequire, register } from 'node:module'

const file = process.env.LOADED_MODULES_FILE
if (!file) throw new Error('loaded-modules.mjs needs LOADED_MODULES_FILE')
register('./loaded-modules-hooks.mjs', import.meta.url, { data: { file } })
process.on('exit', () => {
  const cjs = Object.keys(createRequire(import.meta.url).cache).map((path) => `cjs ${path}`)
  const api = globalThis[Symbol.for('opentelemetry.js.api.1')]
  const registered = api ? Object.keys(api).filter((name) => name !== 'version').map((name) => `otel-global ${name}`) : []
  appendFileSync(file, [...cjs, ...registered, 'exit'].join('\n') + '\n')
})
