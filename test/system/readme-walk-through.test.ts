import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { promisify } from 'node:util'
import t from 'tap'
import { migratedDataDir } from '../support/pglite-data-dir.js'
import { ROOT, startGatewayProcess } from '../support/processes.js'

/**
 * The README's walk-through (token → verify → invalidate → verify, then one token and a
 * company), run as written: bash runs its shell block against a node started as `npm start`
 * starts one on an empty store, with the key and the admin token that node printed. Only the
 * placeholders of its first two lines are filled in. Every `# …` line that follows a command
 * is what that command prints (`…` stands for anything), and is checked against what it did
 * print, in order. Nothing reaches the script but PATH: what it needs, it sets itself.
 */
const run = promisify(execFile)

const HEADING = '## A walk through: token → verify → invalidate → verify'

/** The first ```sh block under the README's walk-through heading. */
function walkThrough(): string {
  const readme = readFileSync(ROOT + 'README.md', 'utf8')
  const start = readme.indexOf(`\n${HEADING}\n`)
  if (start < 0) throw new Error(`README.md has no "${HEADING}" section`)
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(start))
  if (!block) throw new Error('the walk-through has no ```sh block')
  return block[1]!
}

interface Step {
  script: string
  /** what its commands print, one pattern per `# …` line after a command */
  expected: string[]
}

/** Paragraphs of the block: the comments before a paragraph's first command say what it does, those after a command what it prints. */
function steps(block: string): Step[] {
  return block
    .split(/\n\s*\n/)
    .filter((paragraph) => paragraph.trim() !== '')
    .map((paragraph) => {
      const expected: string[] = []
      let commandSeen = false
      for (const line of paragraph.split('\n')) {
        if (!line.startsWith('#')) commandSeen = true
        else if (commandSeen) expected.push(line.replace(/^# ?/, ''))
      }
      return { script: paragraph, expected }
    })
}

/** `…` in an expected line stands for any text on that line. */
function pattern(expected: string): RegExp {
  return new RegExp(expected.split('…').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('[^\\n]*?'))
}

function fill(text: string, from: string, to: string): string {
  if (!text.includes(from)) throw new Error(`the walk-through no longer holds "${from}": update this test with it`)
  return text.replace(from, to)
}

t.setTimeout(180_000)

t.test("the README's walk-through, run as written against a fresh `npm start`", async (t) => {
  // As `npm start` on an empty store: the demo data and a generated admin token, printed once.
  const node = await startGatewayProcess({ DATA_DIR: await migratedDataDir(t), SEED_DEMO: 'true', ADMIN_TOKEN: undefined } as unknown as Record<string, string>, {
    teardown: t.teardown.bind(t),
    timeoutMs: 120_000,
  })
  const printed = node.output()
  const keyId = /keyId\s+(ak_\S+)/.exec(printed)?.[1]
  const keySecret = /keySecret\s+(sk_\S+)/.exec(printed)?.[1]
  const adminToken = /ADMIN_TOKEN=(\S+)/.exec(printed)?.[1]
  if (!keyId || !keySecret || !adminToken) return t.fail(`the first start prints the demo key and the admin token:\n${printed}`)

  let block = walkThrough()
  block = fill(block, 'KEY_ID=ak_...  KEY_SECRET=sk_...  ADMIN_TOKEN=adm_...', `KEY_ID=${keyId}  KEY_SECRET=${keySecret}  ADMIN_TOKEN=${adminToken}`)
  block = fill(block, 'BASE=http://127.0.0.1:3000', `BASE=${node.url}`)
  const all = steps(block)
  t.ok(all.filter((step) => step.expected.length > 0).length >= 4, 'the walk-through says what its commands print')

  const marker = (i: number) => `@@step ${i}@@`
  const script = all.map((step, i) => `echo '${marker(i)}'\n${step.script}`).join('\n') + '\n'
  const { stdout } = await run('bash', ['-e', '-o', 'pipefail', '-c', script], { env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 })

  all.forEach((step, i) => {
    const start = stdout.indexOf(marker(i))
    const end = i + 1 < all.length ? stdout.indexOf(marker(i + 1)) : stdout.length
    const output = stdout.slice(start + marker(i).length, end)
    let from = 0
    for (const expected of step.expected) {
      const found = pattern(expected).exec(output.slice(from))
      t.ok(found, `step ${i}: prints ${expected}`, { output })
      if (found) from += found.index + found[0].length
    }
  })
})
