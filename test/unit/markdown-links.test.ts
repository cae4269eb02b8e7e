/**
 * Every relative link of every Markdown file of the repository resolves, its #anchor
 * included (issue 42): a reader who follows one lands where it says. In process, no network:
 * `git ls-files '*.md'`, each link resolved on disk, each anchor against GitHub's heading
 * slugs of the page it points into.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { brokenLinks, headingAnchors, linksOf, slug } from '../support/markdown-links.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

t.test("every relative link of the repository's Markdown resolves, anchors included", async (t) => {
  const files = execFileSync('git', ['ls-files', '*.md'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean)
  t.ok(files.includes('README.md') && files.includes('docs/api.md'), `the Markdown files are found (${files.length})`)
  const broken = brokenLinks(ROOT, files)
  t.same(
    broken.map(({ file, line, link, reason }) => `${file}:${line} ${link}: ${reason}`),
    [],
    'no broken link',
  )
})

t.test('every section the code cites ("SPEC §3.3") is a numbered heading of docs/api.md', async (t) => {
  const numbered = new Set([...readFileSync(ROOT + 'docs/api.md', 'utf8').matchAll(/^#{2,3} (\d+(?:\.\d+)*)\.? /gm)].map((m) => m[1]!))
  t.ok(numbered.has('3.3') && numbered.has('9.3'), `the API reference numbers its sections (${[...numbered].join(', ')})`)
  const files = execFileSync('git', ['ls-files', 'src'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter((file) => file.endsWith('.ts'))
  const cited = new Map<string, string>()
  for (const file of files) {
    readFileSync(ROOT + file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        // A § after an RFC's number (RFC 9110 §8.8.3) or a paper's name is theirs, not ours.
        for (const match of line.matchAll(/(\S+\s)?§(\d+(?:\.\d+)*)/g)) {
          if (/^(\d{3,5}|Chubby)\s$/.test(match[1] ?? '')) continue
          cited.set(match[2]!, `${file}:${i + 1}`)
        }
      })
  }
  t.ok(cited.size > 10, `the code cites sections (${cited.size})`)
  t.same([...cited].filter(([section]) => !numbered.has(section)).map(([section, where]) => `§${section} (${where})`), [], 'each leads to a heading')
})

/** A throwaway repository of Markdown files, removed when the test ends. */
function fixture(t: { teardown(fn: () => void): void }, files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'markdown-links-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, dirname(path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

t.test('the checker finds a missing file, a missing anchor and a wrong relative path', async (t) => {
  const root = fixture(t, {
    'README.md': [
      '# Front page',
      'See [the guide](docs/guide.md#the-second-part), [its start](docs/guide.md#the-first-part),',
      '[a page that is not there](docs/missing.md), [a heading that is not there](docs/guide.md#nowhere)',
      'and [this page](#front-page), [a wrong anchor here](#back-page).',
      '```md',
      '[inside a code block](docs/not-checked.md)',
      '```',
      'Inline code is text too: `[x](docs/not-checked-either.md)`; [a site](https://example.com/#x) is not looked at.',
    ].join('\n'),
    'docs/guide.md': ['# The guide', '## The first part', '## The second part', 'Back to [the front page](../README.md), or [not](README.md).'].join('\n'),
  })
  const broken = brokenLinks(root, ['README.md', 'docs/guide.md']).map(({ file, line, link }) => `${file}:${line} ${link}`)
  t.same(broken, ['README.md:3 docs/missing.md', 'README.md:3 docs/guide.md#nowhere', 'README.md:4 #back-page', 'docs/guide.md:4 README.md'])
})

t.test("anchors follow GitHub's slugs", async (t) => {
  t.equal(slug('`POST /rest/v1/auth/token`'), 'post-restv1authtoken')
  t.equal(slug('OAuth: introspection and revocation (RFC 7662, RFC 7009)'), 'oauth-introspection-and-revocation-rfc-7662-rfc-7009')
  t.equal(slug('A walk through: token → verify → invalidate → verify'), 'a-walk-through-token--verify--invalidate--verify')
  t.equal(slug('3.3 Verifying a request’s token'), '33-verifying-a-requests-token')
  t.equal(slug('`REDIS_URL` and [Sentinel](x.md)'), 'redis_url-and-sentinel')
  t.same([...headingAnchors('# Notes\n## Notes\n```\n# not a heading\n```\n## Notes\n<a id="kept"></a>')], ['notes', 'notes-1', 'notes-2', 'kept'])
  t.same(linksOf('[a](b.md "title") [c](<d.md>)\n[ref]: f.md'), [
    { line: 1, link: 'b.md' },
    { line: 1, link: 'd.md' },
    { line: 2, link: 'f.md' },
  ], 'a title is not part of the link; a reference definition is a link')
})
