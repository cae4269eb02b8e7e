/**
 * GET /docs as a person's browser shows it: real headless Chromium (Debian's `chromium`,
 * which `npm test` installs; where it is missing, the test skips and says so) loads the
 * page from a listening node, runs its scripts, and the rendered page lists the token
 * endpoint. Every host but the node's is made unresolvable, so the page renders only if
 * it loads nothing from elsewhere (no CDN). The page does not depend on the store: the
 * store matrix runs this file once.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { locate, missing } from '../../setup/tools.js'
import { startApp } from '../../support/helpers.js'
import { spawnProcess } from '../../support/processes.js'

/** The page's DOM once its scripts ran (Chromium's virtual time lets them finish, then it prints the DOM). */
async function renderedDom(url: string): Promise<string> {
  const profile = mkdtempSync(join(tmpdir(), 'chat-auth-chromium-'))
  try {
    const browser = spawnProcess(
      locate('chromium')!,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        `--user-data-dir=${profile}`,
        // Any other host fails to resolve: a script or style from a CDN would not load.
        '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
        '--virtual-time-budget=15000',
        '--dump-dom',
        url,
      ],
      { name: 'chromium', keepBytes: 4 * 1024 * 1024, env: { HOME: profile } },
    )
    await new Promise<void>((resolve) => (browser.running() ? browser.child.once('exit', () => resolve()) : resolve()))
    return browser.output()
  } finally {
    rmSync(profile, { recursive: true, force: true })
  }
}

t.test('Chromium renders /docs from the node alone, and the page lists the token endpoint', { skip: missing('chromium') }, async (t) => {
  const node = await startApp(t)
  const base = await node.app.listen({ port: 0, host: '127.0.0.1' })

  const served = await node.inject({ method: 'GET', url: '/docs' })
  t.notMatch(served.body, 'data-path="/rest/v1/auth/token"', 'the page as served does not list the endpoints: its scripts render them')

  const dom = await renderedDom(`${base}/docs`)
  t.match(dom, 'chat-auth — chat token gateway', 'the document\'s title is rendered')
  t.match(dom, /data-path="\/rest\/v1\/auth\/token"/, 'the token endpoint is on the page')
  t.match(dom, 'Issue a token for an end user', 'with its summary')
  t.match(dom, /data-path="\/admin\/v1\/companies"/, 'the admin API is on the page too')
})
