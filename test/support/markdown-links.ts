import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize } from 'node:path'

/**
 * Every relative link of a set of Markdown files, resolved the way a code host resolves it:
 * the file (or folder) must exist, and a `#fragment` must name a heading of the Markdown file
 * it points into (GitHub's slugs), or an explicit `<a id>`/`<a name>` there. Links inside
 * code (fenced blocks, inline code) are text, not links; `http:`, `https:`, `mailto:` and
 * other schemes are not looked at (no network).
 */
export interface BrokenLink {
  /** the Markdown file, relative to the root */
  file: string
  line: number
  link: string
  reason: string
}

/** `files`: the Markdown files to check, relative to `root` (`git ls-files '*.md'`). */
export function brokenLinks(root: string, files: readonly string[]): BrokenLink[] {
  const anchorsOf = new Map<string, Set<string>>()
  const anchors = (file: string) => {
    let found = anchorsOf.get(file)
    if (!found) anchorsOf.set(file, (found = headingAnchors(readFileSync(join(root, file), 'utf8'))))
    return found
  }
  const broken: BrokenLink[] = []
  for (const file of files) {
    for (const { line, link } of linksOf(readFileSync(join(root, file), 'utf8'))) {
      const reason = whyBroken(root, file, link, anchors)
      if (reason) broken.push({ file, line, link, reason })
    }
  }
  return broken
}

function whyBroken(root: string, file: string, link: string, anchors: (file: string) => Set<string>): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(link)) return undefined // another scheme: not ours to resolve
  const hash = link.indexOf('#')
  const path = decodeURIComponent(hash < 0 ? link : link.slice(0, hash)).split('?')[0]!
  const fragment = hash < 0 ? undefined : decodeURIComponent(link.slice(hash + 1))
  const target = path === '' ? file : normalize(path.startsWith('/') ? path.slice(1) : join(dirname(file), path))
  if (target.startsWith('..')) return 'points outside the repository'
  if (!existsSync(join(root, target))) return `${target} does not exist`
  if (fragment === undefined || fragment === '') return undefined
  if (statSync(join(root, target)).isDirectory() || !target.endsWith('.md')) return undefined // a line anchor of a code host, or a folder: no headings to check
  return anchors(target).has(fragment) ? undefined : `${target} has no heading whose anchor is #${fragment}`
}

/** The links of a Markdown text with their line numbers: inline links and images, reference definitions and autolinks, outside code. */
export function linksOf(markdown: string): Array<{ line: number; link: string }> {
  const links: Array<{ line: number; link: string }> = []
  proseLines(markdown).forEach(({ text, line }) => {
    const prose = text.replace(/(`+)[\s\S]*?\1/g, '') // inline code is text
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push({ line, link: match[1]! })
    const definition = /^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/.exec(prose)
    if (definition) links.push({ line, link: definition[1]! })
  })
  return links
}

/** The anchors GitHub makes for a Markdown file: one per heading (duplicates numbered -1, -2, …), and explicit `<a id|name>`. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const { text } of proseLines(markdown)) {
    for (const match of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(match[1]!)
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(text)
    if (!heading) continue
    const base = slug(heading[1]!)
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

/**
 * GitHub's anchor for a heading (github-slugger over the heading's rendered text): the text
 * in lower case, every character that is not a letter, a mark, a digit, `_`, `-` or a space
 * dropped, each space a `-`.
 */
export function slug(heading: string): string {
  const rendered = heading
    .replace(/`([^`]*)`/g, '$1')
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/\*\*|\*/g, '')
  return rendered
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-')
}

/** The lines of a Markdown text that are not inside a fenced code block, numbered from 1. */
function proseLines(markdown: string): Array<{ text: string; line: number }> {
  const lines: Array<{ text: string; line: number }> = []
  let fence: string | undefined
  markdown.split('\n').forEach((text, index) => {
    const marker = /^ {0,3}(`{3,}|~{3,})/.exec(text)?.[1]
    if (fence === undefined && marker) fence = marker
    else if (fence !== undefined && marker && marker[0] === fence[0] && marker.length >= fence.length && text.trim() === marker) fence = undefined
    else if (fence === undefined) lines.push({ text, line: index + 1 })
  })
  return lines
}
