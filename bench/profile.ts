/**
 * Summarizes a V8 .cpuprofile (from `npm run bench -- --cpu-prof`): self time by function
 * and by package/file, so a profile can be read without a browser.
 *
 *   node dist/bench/profile.js bench-profiles/CPU.*.cpuprofile [--top 30]
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

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

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '30' } } })
const top = Number(values.top)

for (const file of positionals) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const total = [...self.values()].reduce((a, b) => a + b, 0)
  const idle = [...self.entries()].filter(([id]) => ['(idle)', '(program)'].includes(byId.get(id)!.callFrame.functionName)).reduce((a, [, t]) => a + t, 0)
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
    if (['(idle)', '(program)'].includes(n.callFrame.functionName)) continue
    byFn.set(fnKey(n), (byFn.get(fnKey(n)) ?? 0) + t)
    const f = n.callFrame.url ? where(n.callFrame.url) : n.callFrame.functionName
    byFile.set(f, (byFile.get(f) ?? 0) + t)
  }
  const pct = (t: number) => ((100 * t) / busy).toFixed(1).padStart(5) + ' %'
  console.log(`${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s busy (percentages of busy time)\n`)
  console.log('self time by package / file')
  for (const [k, t] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${pct(t)}  ${k}`)
  console.log('\nself time by function')
  for (const [k, t] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${pct(t)}  ${k}`)
}
