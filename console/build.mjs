/**
 * `npm run build`'s second half: the console (console/src) bundled by esbuild into
 * dist/console/: index.html and assets/<name>-<hash>.{js,css}. The page is served with
 * `Content-Security-Policy: default-src 'self'` (SPEC §10.3), so it has no inline script or
 * style: index.html only links the two hashed files, by absolute path, so that every
 * /console/* URL (which the server answers with index.html) loads the same ones.
 */
import { build } from 'esbuild'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = (path) => fileURLToPath(new URL(path, import.meta.url))
const out = here('../dist/console/')
const PUBLIC_PATH = '/console/assets/'

rmSync(out, { recursive: true, force: true })
mkdirSync(out, { recursive: true })
const result = await build({
  entryPoints: { console: here('src/main.tsx') },
  outdir: `${out}assets`,
  entryNames: '[name]-[hash]',
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
})
const outputs = Object.keys(result.metafile.outputs)
const asset = (extension) => {
  const found = outputs.filter((path) => path.endsWith(extension))
  if (found.length !== 1) throw new Error(`console build: expected one ${extension} file, got ${found.join(', ') || 'none'}`)
  return PUBLIC_PATH + basename(found[0])
}
const page = readFileSync(here('index.html'), 'utf8').replace('{{js}}', asset('.js')).replace('{{css}}', asset('.css'))
writeFileSync(`${out}index.html`, page)
