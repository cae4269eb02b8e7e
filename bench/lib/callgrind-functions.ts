import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'

/**
 * The instructions of one callgrind dump by function, JavaScript included. callgrind sees
 * V8's generated code as bare addresses (`???:0x…`); a process started with
 * `--perf-basic-prof` writes the name of every piece of code it generates, with its address
 * and size, to `/tmp/perf-<pid>.map` (the format Linux `perf` reads), so each address is
 * named after the JavaScript function whose code holds it. A function's tiers (interpreted,
 * baseline, optimised) are summed under one name.
 *
 * Self cost only: `callgrind_annotate --inclusive=no`, which ships with valgrind.
 */
export function instructionsByFunction(dump: string, perfMap: string): Map<string, number> {
  const code = existsSync(perfMap) ? readPerfMap(perfMap) : []
  const annotated = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', dump], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
  const byFunction = new Map<string, number>()
  for (const line of annotated.split('\n')) {
    const match = /^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$/.exec(line)
    if (match === null || match[2]!.includes('PROGRAM TOTALS')) continue
    const instructions = Number(match[1]!.replaceAll(',', ''))
    const where = match[2]!.replace(/\s*\[[^\]]*\]\s*$/, '')
    const address = /^\?\?\?:0x([0-9a-f]+)$/.exec(where)
    const name = address ? 'JS ' + (codeAt(code, parseInt(address[1]!, 16)) ?? 'unnamed code') : where.replace(/^\?\?\?:/, '')
    byFunction.set(name, (byFunction.get(name) ?? 0) + instructions)
  }
  return byFunction
}

interface CodeRange {
  start: number
  end: number
  name: string
}

function readPerfMap(file: string): CodeRange[] {
  const ranges: CodeRange[] = []
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const [start, size, ...name] = line.split(' ')
    if (start === undefined || size === undefined || name.length === 0) continue
    const from = parseInt(start, 16)
    // "JS:*name file:line:column": the tier marks (~ interpreted, ^ baseline, + and * optimised) dropped
    ranges.push({ start: from, end: from + parseInt(size, 16), name: name.join(' ').replace(/^JS:[~^+*]?/, '') })
  }
  // by start; code written later at the same address (after a collection moved the old) wins
  return ranges.map((range, order) => ({ range, order })).sort((a, b) => a.range.start - b.range.start || a.order - b.order).map(({ range }) => range)
}

function codeAt(ranges: CodeRange[], address: number): string | undefined {
  let low = 0
  let high = ranges.length - 1
  let last = -1
  while (low <= high) {
    const mid = (low + high) >> 1
    if (ranges[mid]!.start <= address) {
      last = mid
      low = mid + 1
    } else {
      high = mid - 1
    }
  }
  // the latest range starting at or below the address that still covers it
  for (let i = last; i >= 0 && i > last - 64; i--) if (address < ranges[i]!.end) return ranges[i]!.name
  return undefined
}
