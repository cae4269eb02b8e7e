import { accessSync, constants, existsSync, readdirSync } from 'node:fs'
import { delimiter, isAbsolute, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { recordNotRun } from './not-run.js'

/**
 * The programs some tests run besides Node, PostgreSQL and Redis, each with its Debian
 * package. `npm test` installs the missing ones first (prepare.ts); a test that needs one
 * that is still missing skips, and says why (`missing`). Both ask this module, so that "is
 * it installed" has one answer.
 */
export const TOOLS = {
  /** the proxy tests run the nginx configs the project ships */
  nginx: { debianPackage: 'nginx-light', candidates: ['/usr/sbin/nginx', 'nginx'] },
  /** and its Caddyfile */
  caddy: { debianPackage: 'caddy', candidates: ['caddy'] },
  /** the /docs page test renders the page in it */
  chromium: { debianPackage: 'chromium', candidates: ['/usr/bin/chromium', '/usr/bin/chromium-browser'] },
  /** the clock tests and the chaos run start nodes whose wall clock is off (its libfaketime: `faketimeLibrary`) */
  faketime: { debianPackage: 'faketime', candidates: ['/usr/bin/faketime', 'faketime'] },
  /** the Redis Cluster tests cut a master off the cluster's bus (its other nodes) while clients still reach it */
  iptables: { debianPackage: 'iptables', candidates: ['/usr/sbin/iptables', 'iptables'] },
} as const

export type ToolName = keyof typeof TOOLS

export const TOOL_NAMES = Object.keys(TOOLS) as ToolName[]

/**
 * Tools to treat as not installed and not installable, whatever the machine has: only the
 * setup's own test sets it (test/system/setup.test.ts), to walk the path of a machine that lacks them.
 */
export const PRETEND_MISSING_VARIABLE = 'TEST_PRETEND_MISSING'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export function pretendedMissing(name: ToolName): boolean {
  return (process.env[PRETEND_MISSING_VARIABLE] ?? '').split(',').includes(name)
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The path of `name`'s program, or undefined when it is not installed. */
export function locate(name: ToolName): string | undefined {
  if (pretendedMissing(name)) return undefined
  const searchPath = (process.env.PATH ?? '').split(delimiter).filter(Boolean)
  for (const candidate of TOOLS[name].candidates) {
    if (isAbsolute(candidate)) {
      if (executable(candidate)) return candidate
    } else {
      const found = searchPath.map((dir) => join(dir, candidate)).find(executable)
      if (found) return found
    }
  }
  return undefined
}

/**
 * Set by test/support/suite.ts to the file it is loading: in a folder that runs as one
 * process, `process.argv[1]` is the folder's all.test.ts, not the file whose test skipped.
 */
export const SUITE_FILE_VARIABLE = 'CHAT_AUTH_TEST_FILE'

/**
 * For tap's `skip` option of a test that runs `names`: false when every one is installed,
 * else the reason, which is also recorded for `npm test`'s summary (not-run.ts).
 */
export function missing(...names: ToolName[]): string | false {
  const absent = names.filter((name) => locate(name) === undefined)
  if (absent.length === 0) return false
  const reason = `not installed: ${absent.map((name) => `${name} (Debian package ${TOOLS[name].debianPackage})`).join(', ')}`
  recordNotRun({ file: process.env[SUITE_FILE_VARIABLE] ?? relative(ROOT, process.argv[1] ?? '?'), tools: absent, reason })
  return reason
}

/**
 * The library the faketime package installs (with its `faketime` program), for LD_PRELOAD:
 * the program forks and does not pass signals on, so a node a test must stop, pause or
 * kill runs with the library preloaded instead. Its thread-safe build (Node has threads).
 */
export function faketimeLibrary(): string | undefined {
  if (locate('faketime') === undefined) return undefined
  const dirs = ['/usr/lib', ...readdirSync('/usr/lib').map((dir) => join('/usr/lib', dir))]
  return dirs.map((dir) => join(dir, 'faketime', 'libfaketimeMT.so.1')).find((path) => existsSync(path))
}
