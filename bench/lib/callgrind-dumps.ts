import { readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

export interface DumpTotals {
  /** the dump these came from */
  file: string
  instructions: number
  /** DLmr + DLmw, when the cache was simulated */
  lastLevelMisses?: number
}

/**
 * The `totals:` of a target's latest dump taken on request (`callgrind_control -d`), named
 * `<target>.<pid>.<n>` by `--callgrind-out-file=<dir>/<target>.%p`; undefined while there is none.
 */
export function latestDump(dir: string, target: string): DumpTotals | undefined {
  // `<target>.<pid>.<n>`: the n-th dump of that process (the one at exit has no `.<n>`)
  const files = readdirSync(dir).filter((f) => new RegExp(`^${target}\\.\\d+\\.\\d+$`).test(f)).sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()))
  const last = files.pop()
  if (last === undefined) return undefined
  const text = readFileSync(join(dir, last), 'utf8')
  const totals = /^totals:\s+([\d ]+)/m.exec(text)?.[1]?.trim().split(/\s+/).map(Number)
  if (totals === undefined) return undefined
  // the events' order is the dump's own `events:` line (Ir first; with the cache simulated, DLmr and DLmw among them)
  const events = /^events:\s+(.+)$/m.exec(text)?.[1]?.trim().split(/\s+/) ?? ['Ir']
  const at = (name: string) => totals[events.indexOf(name)]
  const reads = at('DLmr')
  const writes = at('DLmw')
  return { file: join(dir, last), instructions: at('Ir') ?? totals[0]!, lastLevelMisses: reads === undefined || writes === undefined ? undefined : reads + writes }
}
