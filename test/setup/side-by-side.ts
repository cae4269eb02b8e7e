import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { Failures } from './failures.js'

/**
 * npm scripts side by side. `npm test` runs its build and tap's plugin build this way, then
 * its two passes. The suite is CPU-bound on a small machine, and one pass alone leaves a
 * core idle whenever its files wait (on a lease, a drain, a failover) or one of them runs
 * long (an all.test.ts of test/stores/api/): the other pass's files use it. Each script runs as it would
 * alone, with `args` after `--`; its lines are printed as they come, each after the
 * script's name, then one line per script with its exit and time, and last the failed tests
 * of each script that failed (failures.ts), so that the tail of a long run names them.
 * Resolves to the first failure's exit code (0 when every script passed).
 */
export async function sideBySide(scripts: string[], args: string[] = []): Promise<number> {
  const width = Math.max(...scripts.map((script) => script.length))
  const started = Date.now()
  const runs = scripts.map(
    (script) =>
      new Promise<{ code: number; text: string; failures: string[][] }>((resolve) => {
        const failures = new Failures()
        const child = spawn('npm', ['run', '--silent', script, ...(args.length > 0 ? ['--', ...args] : [])], { stdio: ['ignore', 'pipe', 'pipe'] })
        const label = `[${script.padEnd(width)}] `
        createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
          process.stdout.write(label + line + '\n')
          failures.line(line)
        })
        createInterface({ input: child.stderr, crlfDelay: Infinity }).on('line', (line) => process.stdout.write(label + line + '\n'))
        for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => child.kill(signal))
        child.on('close', (code, signal) => {
          const seconds = ((Date.now() - started) / 1000).toFixed(1)
          const text = `${script}: ${signal ? `killed by ${signal}` : `exit ${code}`} after ${seconds} s`
          resolve({ code: code ?? 1, text, failures: code === 0 ? [] : failures.report() })
        })
      }),
  )
  const results = await Promise.all(runs)
  for (const result of results) process.stdout.write(result.text + '\n')
  for (const [index, result] of results.entries()) {
    if (result.failures.length === 0) continue
    process.stdout.write(`failed in ${scripts[index]}:\n`)
    for (const lines of result.failures) process.stdout.write(lines.map((line) => '  ' + line + '\n').join(''))
  }
  return results.find((result) => result.code !== 0)?.code ?? 0
}
