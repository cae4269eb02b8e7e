import { Parser, type Result } from 'tap-parser'

/**
 * The failures of one tap run, read from its TAP output as it is printed, so that `npm test`
 * can name them again after both passes end. CI shows only the tail of a run's output: a
 * failure deep in the log was otherwise known by a count alone ("fail: 1").
 *
 * Each failure is named by its full path (file > subtest > … > assertion). Only the deepest
 * are kept: a subtest fails because one of its points did, and naming it again says nothing
 * more. A file that failed with no failing point (a crash, a timeout) is named itself.
 */
export class Failures {
  readonly #parser = new Parser()
  readonly #failed = new Map<string, Result>()

  constructor() {
    this.#watch(this.#parser)
  }

  /** One line of the run's output, without its line break. */
  line(text: string): void {
    this.#parser.write(text + '\n')
  }

  /**
   * Ends the reading; the failures, each as a few lines, in the order they were printed,
   * at most `most` of them (then a line that says how many more).
   */
  report(most = 20): string[][] {
    this.#parser.end()
    const failed = [...this.#failed.values()]
    const deepest = failed.filter((result) => !failed.some((other) => other.fullname.startsWith(result.fullname + ' > ')))
    const shown = deepest.slice(0, most).map(describe)
    return deepest.length > most ? [...shown, [`… and ${deepest.length - most} more`]] : shown
  }

  #watch(parser: Parser): void {
    parser.on('assert', (result: Result) => {
      if (!result.ok && !result.todo && !result.skip) this.#failed.set(`${result.fullname}\n${result.id}`, result)
    })
    parser.on('child', (child: Parser) => this.#watch(child))
  }
}

const DETAIL_LINES = 12

/** A failure's name, then what its diagnostics say of where and why, cut to a few lines. */
function describe(result: Result): string[] {
  const diag = (result.diag ?? {}) as Record<string, unknown>
  const details: string[] = []
  const at = diag.at as { fileName?: string; lineNumber?: number } | undefined
  if (at?.fileName) details.push(`at ${at.fileName}:${at.lineNumber ?? '?'}`)
  for (const key of ['message', 'diff', 'found', 'wanted', 'pattern', 'exitCode', 'signal', 'expired', 'stack']) {
    if (diag[key] === undefined || diag[key] === null) continue
    const value = typeof diag[key] === 'string' ? (diag[key] as string).trimEnd() : JSON.stringify(diag[key])
    const lines = value.split('\n')
    details.push(`${key}: ${lines[0]}`, ...lines.slice(1).map((line) => '  ' + line))
  }
  const shown = details.length > DETAIL_LINES ? [...details.slice(0, DETAIL_LINES), '…'] : details
  return [result.fullname || result.name, ...shown.map((line) => '    ' + line)]
}
