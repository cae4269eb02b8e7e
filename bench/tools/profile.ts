/**
 * profile: summarises V8 .cpuprofile files (from `--cpu-prof`): self time by package/file and
 * by function, so that a profile can be read without a browser.
 *
 *   npm run bench -- profile bench-profiles/*.cpuprofile [--top 30]
 */
import { readFileSync } from 'node:fs'
import { number } from '../lib/args.js'
import type { Table } from '../lib/report.js'
import { defineTool } from '../lib/scenario.js'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const IDLE = ['(idle)', '(program)']

function summarise(file: string, top: number): { about: string; tables: Table[] } {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const total = [...self.values()].reduce((a, b) => a + b, 0)
  const idle = [...self.entries()].filter(([id]) => IDLE.includes(byId.get(id)!.callFrame.functionName)).reduce((a, [, t]) => a + t, 0)
  const busy = total - idle

  const where = (url: string) => {
    if (!url) return '(native)'
    const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
    if (m) return m[1]!
    if (url.startsWith('node:')) return url
    const d = /\/dist\/(.*)$/.exec(url)
    return d ? d[1]! : url
  }
  const fnKey = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'}  ${where(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`
  const byFn = new Map<string, number>()
  const byFile = new Map<string, number>()
  for (const [id, t] of self) {
    const n = byId.get(id)!
    if (IDLE.includes(n.callFrame.functionName)) continue
    byFn.set(fnKey(n), (byFn.get(fnKey(n)) ?? 0) + t)
    const f = n.callFrame.url ? where(n.callFrame.url) : n.callFrame.functionName
    byFile.set(f, (byFile.get(f) ?? 0) + t)
  }
  const pct = (t: number) => ((100 * t) / busy).toFixed(1) + ' %'
  const rows = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([k, t]) => [k, pct(t)])
  return {
    about: `${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s busy (percentages of busy time)`,
    tables: [
      { title: `${file}: self time by package / file`, headers: ['package / file', 'self'], rows: rows(byFile) },
      { title: `${file}: self time by function`, headers: ['function', 'self'], rows: rows(byFn) },
    ],
  }
}

export default defineTool({
  name: 'profile',
  description: 'summarises .cpuprofile files given after it (from --cpu-prof): self time by package and by function',
  options: {
    top: number('rows per table', { default: 30 }),
  },
  async run(ctx) {
    if (ctx.files.length === 0) throw new Error('name the .cpuprofile files, e.g. npm run bench -- profile bench-profiles/*.cpuprofile')
    const summaries = ctx.files.map((file) => summarise(file, ctx.opts.top))
    return { scenario: 'profile', title: 'profile: self time', about: summaries.map((s) => s.about), tables: summaries.flatMap((s) => s.tables) }
  },
})
