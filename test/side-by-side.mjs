#!/usr/bin/env node
// npm scripts side by side: `node test/side-by-side.mjs test:pglite test:postgres`.
//
// `npm test` runs its build and tap's plugin build this way, then its two passes. The suite
// is CPU-bound on a small machine, and one pass alone leaves a core idle whenever its
// files wait (on a lease, a drain, a failover) or one of them runs long (test/api.test.ts):
// the other pass's files use it. Each script runs as it would alone; its lines are printed
// as they come, each after the script's name, and the exit code is the first failure's
// (0 when every script passed).
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'

const scripts = process.argv.slice(2)
if (scripts.length === 0) {
  process.stderr.write('usage: node test/side-by-side.mjs <npm script>...\n')
  process.exit(2)
}

const width = Math.max(...scripts.map((script) => script.length))
const started = Date.now()
const runs = scripts.map(
  (script) =>
    new Promise((resolve) => {
      const child = spawn('npm', ['run', '--silent', script], { stdio: ['ignore', 'pipe', 'pipe'] })
      const label = `[${script.padEnd(width)}] `
      for (const stream of [child.stdout, child.stderr]) {
        createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => process.stdout.write(label + line + '\n'))
      }
      for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => child.kill(signal))
      child.on('close', (code, signal) => {
        const seconds = ((Date.now() - started) / 1000).toFixed(1)
        resolve({ code: code ?? 1, text: `${script}: ${signal ? `killed by ${signal}` : `exit ${code}`} after ${seconds} s` })
      })
    }),
)

const results = await Promise.all(runs)
for (const result of results) process.stdout.write(result.text + '\n')
process.exit(results.find((result) => result.code !== 0)?.code ?? 0)
