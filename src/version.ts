import { readFileSync } from 'node:fs'

/**
 * The package's version, from its own package.json: the nearest one above this module named
 * chat-auth-gateway (src/ under tsx, dist/src/ once built: not the same depth).
 */
export const VERSION: string = packageVersion()

function packageVersion(): string {
  for (let folder = new URL('./', import.meta.url); ; folder = new URL('../', folder)) {
    try {
      const found = JSON.parse(readFileSync(new URL('package.json', folder), 'utf8')) as { name?: string; version?: string }
      if (found.name === 'chat-auth-gateway' && typeof found.version === 'string') return found.version
    } catch {
      // none here: look further up
    }
    if (folder.pathname === '/') return 'unknown'
  }
}
