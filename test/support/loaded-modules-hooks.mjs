// The loader hooks of loaded-modules.mjs: every resolved module URL, one line each, as it loads.
import { appendFileSync } from 'node:fs'

let file

export function initialize(data) {
  file = data.file
}

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context)
  appendFileSync(file, `esm ${resolved.url}\n`)
  return resolved
}
